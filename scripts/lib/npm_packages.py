"""Writes the npm packages of idem-mcp, for scripts/dist.sh (this
machine's platform) and .github/workflows/release.yml (every platform):

  python3 scripts/lib/npm_packages.py main VERSION OUT
      the package users name, `idem-mcp`: the launcher
      (packaging/npm/idem-mcp/bin/idem-mcp.js), the README, and every
      platform package the launcher knows as an optional dependency at
      VERSION
  python3 scripts/lib/npm_packages.py platform VERSION NAME BINARY OUT
      the package of one platform, `idem-mcp-NAME` (NAME as the launcher
      names it: linux-x64-gnu, darwin-arm64, win32-x64, ..), holding
      BINARY as bin/idem (bin/idem.exe on Windows), installed by npm only
      where its os, cpu and libc match

Each is packed with `npm pack` into OUT as a .tgz; prints its path. The
platforms are read from the launcher, so that the two cannot disagree.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPM = os.path.join(ROOT, "packaging", "npm")
LAUNCHER = os.path.join(NPM, "idem-mcp", "bin", "idem-mcp.js")


def platforms():
    """The platform packages the launcher looks for, by their NAME."""
    names = re.findall(r'"idem-mcp-([a-z0-9-]+)"', open(LAUNCHER).read())
    return sorted(set(names))


def pack(directory, out):
    os.makedirs(out, exist_ok=True)
    made = subprocess.run(
        ["npm", "pack", "--silent", "--pack-destination", os.path.abspath(out), directory],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()[-1]
    print(os.path.join(out, made))


def write(path, package):
    with open(path, "w") as f:
        json.dump(package, f, indent=2)
        f.write("\n")


def main_package(version, out):
    with tempfile.TemporaryDirectory() as stage:
        here = os.path.join(stage, "idem-mcp")
        shutil.copytree(os.path.join(NPM, "idem-mcp"), here)
        shutil.copy(os.path.join(ROOT, "packaging", "pypi", "README.md"), os.path.join(here, "README.md"))
        package = json.load(open(os.path.join(here, "package.json")))
        package["version"] = version
        package["optionalDependencies"] = {f"idem-mcp-{name}": version for name in platforms()}
        write(os.path.join(here, "package.json"), package)
        pack(here, out)


def platform_package(version, name, binary, out):
    if name not in platforms():
        sys.exit(f"npm_packages.py: the launcher knows no platform {name}; it knows {', '.join(platforms())}")
    os_, cpu, *libc = name.split("-")
    exe = "idem.exe" if os_ == "win32" else "idem"
    with tempfile.TemporaryDirectory() as stage:
        here = os.path.join(stage, f"idem-mcp-{name}")
        os.makedirs(os.path.join(here, "bin"))
        shutil.copy(binary, os.path.join(here, "bin", exe))
        os.chmod(os.path.join(here, "bin", exe), 0o755)
        package = {"name": f"idem-mcp-{name}", "version": version}
        package.update(json.load(open(os.path.join(NPM, "platform.json"))))
        package["os"], package["cpu"] = [os_], [cpu]
        if libc:
            package["libc"] = ["glibc" if libc == ["gnu"] else "musl"]
        write(os.path.join(here, "package.json"), package)
        pack(here, out)


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["main", version, out]:
            main_package(version, out)
        case ["platform", version, name, binary, out]:
            platform_package(version, name, binary, out)
        case _:
            sys.exit(__doc__)
