import express, { type Express } from 'express';

/**
 * `/docs`: an interactive API reference (Swagger UI from the swagger-ui-dist package, served
 * from this process: no CDN) rendering the OpenAPI document.
 */
export function mountDocsPage(app: Express, documentUrl: string): void {
  // Only the folder's path: the package's index would load (and keep) the 1.5 MB bundle in
  // this process; the assets are served from disk.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const assets: string = require('swagger-ui-dist/absolute-path.js')();
  const page = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>hostflow API reference</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>`;
  const init = `window.ui = SwaggerUIBundle({ url: ${JSON.stringify(documentUrl)}, dom_id: '#swagger-ui', deepLinking: true });\n`;
  app.get(['/docs', '/docs/'], (_req, res) => {
    res.setHeader('Content-Security-Policy', "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'");
    res.type('html').send(page);
  });
  app.get('/docs/init.js', (_req, res) => {
    res.type('application/javascript').send(init);
  });
  app.use('/docs/assets', express.static(assets, { index: false, maxAge: '1h' }));
}
