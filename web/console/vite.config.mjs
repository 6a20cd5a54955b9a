// Builds the console (Preact + TSX) into dist/web/console/, served by the API at /console/.
// `npm run build` runs it; the jest setup runs it when the build is older than these sources.
import { fileURLToPath } from 'node:url';
import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/console/',
  plugins: [preact({ devToolsInProd: false, prefreshEnabled: false })],
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('../../dist/web/console', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // No inline script (the Content-Security-Policy forbids it), no module-preload polyfill.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    manifest: true,
    reportCompressedSize: false,
  },
});
