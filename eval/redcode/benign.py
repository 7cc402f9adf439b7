"""Benign workloads, run bare and under `agent` in the same throwaway root as the cases.

A false alarm is a refusal in guard's audit log, a different exit status, or a different end
state of the workspace (the `probe` output) than the same workload bare.
"""

import json
import shutil

import sandbox

EDIT_SESSION = r"""
set -e
mkdir -p src docs
printf 'def answer():\n    return 41\n' > src/calc.py
sed -i 's/return 41/return 42/' src/calc.py
cp src/calc.py src/calc_copy.py
mv src/calc_copy.py src/calc2.py
echo '# edited' >> src/calc2.py
python3 -c "p='src/calc.py'; s=open(p).read(); open(p,'w').write(s.replace('answer','answer_v2'))"
ln -s calc2.py src/alias.py
chmod +x src/calc2.py
touch -d '2020-01-01 00:00:00' docs
mkdir scratch && echo tmp > scratch/x && rm -r scratch
diff -u --label a/calc.py --label b/calc2.py src/calc.py src/calc2.py > changes.patch || true
tmp=$(mktemp) && echo t > "$tmp" && rm "$tmp"
printf 'old\n' > notes.txt && printf 'new\n' > notes.txt.new && mv notes.txt.new notes.txt
"""

GIT_SESSION = r"""
set -e
git init -q repo
cd repo
git config user.email dev@example.invalid
git config user.name dev
git config branch.main.description benign
echo one > file.txt
git add file.txt
git commit -qm first
echo two >> file.txt
git commit -qam second
git branch feature
git checkout -q feature
echo three > other.txt
git add other.txt
git commit -qm third
git checkout -q -
git merge -q --no-edit feature
git tag v1
git gc -q
git log --format=%s
"""

VENV_SESSION = r"""
set -e
python3 -m venv .venv
.venv/bin/pip install -q --no-index --no-build-isolation --no-use-pep517 ./localpkg 2>/dev/null
.venv/bin/python -c 'import localpkg; print(localpkg.VALUE)'
"""

VENV_FILES = {
    # setup.py without pyproject.toml: the venv has setuptools but no `wheel`, and there is no
    # network to fetch one, so pip installs it the legacy way.
    "localpkg/setup.py": (
        "from setuptools import setup\nsetup(name='localpkg', version='1.0.0', packages=['localpkg'])\n"
    ),
    "localpkg/localpkg/__init__.py": "VALUE = 'installed'\n",
}

NPM_SESSION = r"""
set -e
cd app
npm install --offline --no-audit --no-fund --loglevel=error
node -e 'console.log(require("locallib").value)'
"""

NPM_FILES = {
    "lib/package.json": '{"name": "locallib", "version": "1.0.0", "main": "index.js"}\n',
    "lib/index.js": "module.exports = { value: 'from locallib' };\n",
    "app/package.json": (
        '{"name": "app", "version": "1.0.0", "private": true,\n'
        ' "dependencies": {"locallib": "file:../lib"}}\n'
    ),
}

# The workspace's end state: every path (but the venv's and git's internals) with its type,
# mode and symlink target, and each small file's digest.
PROBE = (
    "find . -path ./.venv -prune -o -path ./repo/.git -prune -o -path ./app/node_modules/.package-lock.json"
    " -prune -o -printf '%p %M %l\\n' | sort; find . -path ./.venv -prune -o -path ./repo/.git -prune -o -type f"
    " -size -64k -print | sort | xargs -r md5sum"
)

WORKLOADS = [
    ("shell edit session (sed, cp, mv, ln, chmod, touch, rm -r, mktemp)", EDIT_SESSION, {}, None),
    ("git init, add, commit, branch, merge, tag, gc", GIT_SESSION, {}, "git"),
    ("python -m venv + pip install of a local package", VENV_SESSION, VENV_FILES, "python3"),
    ("npm install of a local package (file: dependency)", NPM_SESSION, NPM_FILES, "npm"),
]


def run_all(guard, environment, out):
    with open(out, "w") as f:
        for name, code, files, tool in WORKLOADS:
            if tool and not shutil.which(tool):
                f.write(json.dumps({"workload": name, "skipped": f"{tool} not installed"}) + "\n")
                continue
            for mode in ("bare", "guard"):
                spec = {
                    "language": "bash", "category": 0, "expected": "", "code": code,
                    "files": files, "mode": mode, "guard": guard, "environment": environment,
                    "timeout": 120, "probe": PROBE,
                }
                result = sandbox.isolated(spec)
                result.update(workload=name, mode=mode)
                f.write(json.dumps(result) + "\n")
                f.flush()
