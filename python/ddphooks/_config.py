"""What the Python side reads of a ddph config (a dict, YAML text or a
path) before the loader sees it: its hook families, for the adapters'
choices and refusals. The loader stays the judge of the config; where
PyYAML is missing or the YAML is bad these read what they can."""
from .session import _config_source


def config_doc(config):
    """The config as a dict (a YAML path or text parsed with PyYAML), or its
    text where PyYAML is absent or the YAML is bad (the loader reports that),
    or None where the file cannot be read (the loader reports that too)."""
    if isinstance(config, dict):
        return config
    path, text = _config_source(config)
    if path is not None:
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            return None
    try:
        import yaml
        return yaml.safe_load(text)
    except Exception:
        return text


def hooks(config):
    """The (family, name) pairs a config names (hook, wraps, rules), best
    effort; the name is None where the YAML could not be parsed."""
    doc = config_doc(config)
    if isinstance(doc, str):
        import re
        return {(f, None) for f in re.findall(r"family\s*:\s*['\"]?(\w+)", doc)}
    found = set()

    def walk(hook):
        if isinstance(hook, dict):
            if isinstance(hook.get("family"), str):
                name = hook.get("name")
                found.add((hook["family"], name if isinstance(name, str) else None))
            walk(hook.get("wrap"))
    if isinstance(doc, dict):
        walk(doc.get("hook"))
        for rule in doc.get("rules") or []:
            if isinstance(rule, dict):
                walk(rule.get("hook"))
    return found


def families(config):
    """The hook families a config names (hook, wraps, rules), best effort."""
    return {family for family, _ in hooks(config)}
