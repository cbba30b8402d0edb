#!/usr/bin/env node
// The `idem-mcp` command of the npm package: finds the `idem` binary of
// this platform's package (one of the optionalDependencies, which npm
// installs only where its os, cpu and libc match) and runs it with the
// same arguments, standard input, output and error (the MCP stream goes
// through untouched: this launcher writes nothing to them), forwarding
// the signals a client sends and exiting as the binary did. No download
// and no install script: the binary came with the package.
"use strict";

const { spawn } = require("node:child_process");
const path = require("node:path");

// The platform packages, by `${process.platform}-${process.arch}` (and
// the C library on Linux): scripts/dist.sh writes the same names.
const PACKAGES = {
  "linux-x64-glibc": "idem-mcp-linux-x64-gnu",
  "linux-arm64-glibc": "idem-mcp-linux-arm64-gnu",
  "linux-x64-musl": "idem-mcp-linux-x64-musl",
  "linux-arm64-musl": "idem-mcp-linux-arm64-musl",
  "darwin-x64": "idem-mcp-darwin-x64",
  "darwin-arm64": "idem-mcp-darwin-arm64",
  "win32-x64": "idem-mcp-win32-x64",
};

function platform() {
  let name = `${process.platform}-${process.arch}`;
  if (process.platform === "linux") {
    // Node built against glibc says which; one on musl does not.
    const header = process.report ? process.report.getReport().header : {};
    name += header.glibcVersionRuntime ? "-glibc" : "-musl";
  }
  return name;
}

function binary() {
  const here = platform();
  const pkg = PACKAGES[here];
  const exe = process.platform === "win32" ? "idem.exe" : "idem";
  if (pkg) {
    try {
      return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), "bin", exe);
    } catch {
      // Not installed: said below.
    }
  }
  const why = pkg
    ? `its package, ${pkg}, was not installed (was the install run with --no-optional or --omit=optional?)`
    : "there is no package of idem-mcp for it";
  process.stderr.write(
    `idem-mcp: this platform is ${here}, and ${why}.\n` +
      "Other ways to run it:\n" +
      "  uvx idem-mcp ...                 (the PyPI package, if uv has a wheel for this platform)\n" +
      "  cargo install idem-cli --locked  (builds `idem` from source with Rust 1.95 or newer, a few minutes)\n" +
      "and then run `idem` with the same arguments.\n",
  );
  process.exit(1);
}

const child = spawn(binary(), process.argv.slice(2), { stdio: "inherit", windowsHide: true });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"]) {
  process.on(signal, () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  });
}
child.on("error", (error) => {
  process.stderr.write(`idem-mcp: cannot run ${child.spawnfile}: ${error.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // End as the binary did: by the same signal, once ours are let go.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code);
  }
});
