"""CTest's JSON list of the GPU tests -> the runner's list, with the build
directory written as /work/main/build (device.sh makes that path resolve);
prints the test binaries' names, one per line."""
import json
import os
import sys

ctest, out, build = sys.argv[1:4]
tests, binaries = [], []
for t in json.load(open(ctest))['tests']:
    props = {p['name']: p['value'] for p in t.get('properties', [])}
    fix = lambda s: s.replace(build, '/work/main/build') if isinstance(s, str) else s
    command = [fix(c) for c in t['command']]
    tests.append({'name': t['name'], 'command': command, 'wd': fix(props.get('WORKING_DIRECTORY')),
                  'env': props.get('ENVIRONMENT', []), 'timeout': props.get('TIMEOUT', 300)})
    name = os.path.basename(command[0])
    if name not in binaries:
        binaries.append(name)
json.dump(tests, open(out, 'w'), indent=0)
print('\n'.join(binaries))
