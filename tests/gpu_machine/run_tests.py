"""Runs the GPU tests from pack.sh's list the way CTest would (command,
working directory, environment), one at a time, and writes each result to
OUT/gpu_tests.log (the output of any test that did not pass) and stdout.
Usage: run_tests.py LIST.json OUT_DIR"""
import json, os, subprocess, sys, time
tests = json.load(open(sys.argv[1]))
out = sys.argv[2]
res = []
with open(os.path.join(out, 'gpu_tests.log'), 'w') as log:
    for t in tests:
        env = dict(os.environ)
        for kv in t['env']:
            k, v = kv.split('=', 1)
            env[k] = v
        wd = t['wd'] or '/work/main/build'
        os.makedirs(wd, exist_ok=True)
        t0 = time.time()
        try:
            p = subprocess.run(t['command'], cwd=wd, env=env, capture_output=True, text=True,
                               timeout=min(float(t["timeout"]), 90))
            text = p.stdout + p.stderr
            status = 'FAIL' if p.returncode != 0 else ('SKIP' if '[  SKIPPED ]' in text else 'PASS')
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or b'').decode(errors='replace') if isinstance(e.stdout, bytes) else (e.stdout or '')
            status = 'TIMEOUT'
        dt = time.time() - t0
        res.append((status, t['name'], dt))
        print(f'{status} {dt:6.1f}s {t["name"]}', flush=True)
        log.write(f'==== {status} {dt:.1f}s {t["name"]}\n')
        if status != 'PASS':
            log.write(text[-6000:] + '\n')
        log.flush()
counts = {}
for s, _, _ in res: counts[s] = counts.get(s, 0) + 1
print(counts)
