// Builds the chat widget (Preact + TSX) into one IIFE script, dist/web/widget/widget.js, served by
// the API at /chat/widget.js (with public/demo.html beside it). `npm run build` runs it
// (`npm run build:widget`); the jest setup runs it when the build is older than these sources.
import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

const here = (p: string) => decodeURIComponent(new URL(p, import.meta.url).pathname);

export default defineConfig({
  root: here('.'),
  plugins: [preact({ devtoolsInProd: false, prefreshEnabled: false })],
  logLevel: 'warn',
  publicDir: here('public'),
  build: {
    outDir: here('../../dist/web/widget'),
    emptyOutDir: true,
    // Browsers of the last few years (shadow DOM, adoptedStyleSheets fall back to <style>).
    target: 'es2020',
    lib: { entry: here('src/main.tsx'), formats: ['iife'], name: 'HostflowChat', fileName: () => 'widget.js' },
    reportCompressedSize: false,
  },
});
