// The chat widget: one script tag on any site (README "Chat widget"). Everything it draws lives in
// a shadow root on one element appended to <body>, so the page's styles and the widget's never mix.
import { render } from 'preact';
import { ChatApi } from './api';
import { App } from './App';
import { readSettings } from './settings';
import { stringsFor } from './strings';
import css from './styles.css?inline';

/** Constructed stylesheets need no 'unsafe-inline' in the page's Content-Security-Policy; a <style> is the fallback. */
function adoptStyles(root: ShadowRoot): void {
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(css);
    root.adoptedStyleSheets = [sheet];
  } catch {
    const style = document.createElement('style');
    style.textContent = css;
    root.appendChild(style);
  }
}

function mount(script: HTMLScriptElement | null): void {
  const settings = readSettings(script);
  const host = document.createElement('div');
  host.setAttribute('data-hostflow-chat', '');
  const root = host.attachShadow({ mode: 'open' });
  adoptStyles(root);
  const container = document.createElement('div');
  root.appendChild(container);
  document.body.appendChild(host);
  render(<App api={new ChatApi(settings.api)} settings={settings} t={stringsFor(settings.locale)} />, container);
}

const script = (document.currentScript as HTMLScriptElement | null) ?? document.querySelector<HTMLScriptElement>('script[src*="/chat/widget.js"]');
// Once per page, even if the tag is pasted twice.
const w = window as unknown as { __hostflowChat?: boolean };
if (!w.__hostflowChat) {
  w.__hostflowChat = true;
  if (document.body) mount(script);
  else document.addEventListener('DOMContentLoaded', () => mount(script), { once: true });
}
