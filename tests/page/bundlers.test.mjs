// The npm package the way web developers meet it: the packed tarball (`npm install` of the
// .tgz) in a Vite 8 app, a Vite 7 app, a webpack 5 app and a plain page with an import map,
// each importing the bare `inferno-web` with no bundler configuration at all. Each app's
// production build (built once) and its dev server are served with the cross-origin isolation
// headers (the engine must run on 2 threads) and without them (1 thread), and each must load a
// model by URL and chat, in the browser of the run (INFERNO_BROWSER). Vite's preview server
// compresses the model on the fly, so its runs also load a gzipped .gguf. The model is the 4 MB
// Qwen2 micro file: the subject is the bundle, and with SmolLM2 (98 MB) gzip took most of the
// minute.
//
// The bundlers come from the repository's own devDependencies (vite, vite7, webpack,
// webpack-dev-server), driven through their JavaScript APIs with the app as their root, so
// `inferno-web` resolves from the app's node_modules as in any app.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pack } from '../../scripts/pack.mjs';
import { startServer } from '../../scripts/serve.mjs';
import { MODELS, h, requireModel, watchForProblems } from './harness.mjs';

const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

/** The app's code: what a developer writes after `npm install inferno-web`. */
const MAIN_JS = `import { Inferno } from 'inferno-web';

async function chat() {
  const engine = await Inferno.load('./model.gguf');
  let text = '';
  const question = [{ role: 'user', content: 'What is the capital of France?' }];
  for await (const chunk of await engine.chat.completions.create({ messages: question, temperature: 0, max_tokens: 8, stream: true }))
    text += chunk.choices[0].delta.content ?? '';
  const { build } = await engine.engineInfo();
  return { text, threads: engine.model.threads, build, isolated: self.crossOriginIsolated };
}

chat().then(
  (result) => (window.__result = result),
  (error) => (window.__result = { failed: { name: error.name, kind: error.kind, message: error.message } }),
);
`;

const page = (script) => `<!doctype html>
<meta charset="utf-8">
<title>An app that embeds Inferno</title>
<link rel="icon" href="data:,">
${script}
`;

/**
 * The apps whose production build is made: each is built once and served twice (with the
 * isolation headers and without), since the headers are the server's and not the build's.
 */
const built = new Set();

/** Runs `build()` for `app` unless it has already run. */
async function buildOnce(app, build) {
  if (built.has(app)) return;
  await build();
  built.add(app);
}

/** Links (or copies) `from` to `to`. */
function place(from, to) {
  mkdirSync(path.dirname(to), { recursive: true });
  try {
    linkSync(from, to);
  } catch {
    copyFileSync(from, to);
  }
}

/** A new app folder with the tarball installed, its model in `modelDir` (relative). */
function makeApp(scratch, name, tarball, modelDir) {
  const app = path.join(scratch, name);
  mkdirSync(path.join(app, 'src'), { recursive: true });
  writeFileSync(path.join(app, 'package.json'), `{ "name": "${name}", "private": true, "type": "module" }\n`);
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', tarball], {
    cwd: app,
    stdio: 'inherit',
  });
  writeFileSync(path.join(app, 'src', 'main.js'), MAIN_JS);
  place(requireModel(MODELS.qwen2Micro), path.join(app, modelDir, 'model.gguf'));
  return app;
}

/** Vite (`vite` is 8, `vite7` is 7): the production build under `vite preview`, or `vite`. */
function viteApp(packageName) {
  return {
    compressesModels: true,
    setup(scratch, tarball) {
      const app = makeApp(scratch, packageName, tarball, 'public');
      writeFileSync(path.join(app, 'index.html'), page('<script type="module" src="/src/main.js"></script>'));
      return app;
    },
    async serve(app, mode, isolated) {
      const vite = await import(packageName);
      const headers = isolated ? ISOLATION : {};
      const config = { root: app, configFile: false, logLevel: 'warn', clearScreen: false };
      if (mode === 'dev') {
        const server = await vite.createServer({ ...config, server: { port: 0, headers } });
        await server.listen();
        return { url: server.resolvedUrls.local[0], close: () => server.close() };
      }
      await buildOnce(app, () =>
        vite.build({ ...config, build: { outDir: path.join(app, 'dist'), emptyOutDir: true } }),
      );
      const server = await vite.preview({ ...config, preview: { port: 0, headers } });
      return { url: server.resolvedUrls.local[0], close: () => server.close() };
    },
  };
}

/** webpack 5: the production build under a static server, or webpack-dev-server. */
const webpackApp = {
  setup(scratch, tarball) {
    const app = makeApp(scratch, 'webpack5', tarball, 'public');
    writeFileSync(path.join(app, 'public', 'index.html'), page('<script src="main.js"></script>'));
    return app;
  },
  async serve(app, mode, isolated) {
    const { default: webpack } = await import('webpack');
    const config = {
      mode: mode === 'dev' ? 'development' : 'production',
      context: app,
      entry: './src/main.js',
      output: { path: path.join(app, 'dist'), filename: 'main.js', clean: true },
      infrastructureLogging: { level: 'warn' },
      stats: 'errors-warnings',
    };
    if (mode === 'dev') {
      const { default: DevServer } = await import('webpack-dev-server');
      const server = new DevServer(
        {
          port: 0,
          host: '127.0.0.1',
          headers: isolated ? ISOLATION : {},
          static: { directory: path.join(app, 'public') },
          hot: false,
          liveReload: false,
          client: false,
        },
        webpack(config),
      );
      await server.start();
      return { url: `http://127.0.0.1:${server.server.address().port}/`, close: () => server.stop() };
    }
    await buildOnce(app, async () => {
      const stats = await new Promise((resolve, reject) =>
        webpack(config, (error, result) => (error ? reject(error) : resolve(result))),
      );
      assert.ok(!stats.hasErrors(), stats.toString('errors-only'));
      for (const file of ['index.html', 'model.gguf'])
        place(path.join(app, 'public', file), path.join(app, 'dist', file));
    });
    const server = await startServer({ root: path.join(app, 'dist'), port: 0, isolation: isolated });
    return { url: server.url, close: () => server.close() };
  },
};

/** No bundler: an import map names the package's entry, and a static server serves the app. */
const importMapApp = {
  setup(scratch, tarball) {
    const app = makeApp(scratch, 'import-map', tarball, '.');
    const importMap = JSON.stringify({ imports: { 'inferno-web': './node_modules/inferno-web/inferno.js' } });
    writeFileSync(
      path.join(app, 'index.html'),
      page(
        `<script type="importmap">${importMap}</script>\n<script type="module" src="./src/main.js"></script>`,
      ),
    );
    return app;
  },
  async serve(app, mode, isolated) {
    const server = await startServer({ root: app, port: 0, isolation: isolated });
    return { url: server.url, close: () => server.close() };
  },
};

const APPS = [
  ['Vite 8', viteApp('vite'), ['build', 'dev']],
  ['Vite 7', viteApp('vite7'), ['build', 'dev']],
  ['webpack 5', webpackApp, ['build', 'dev']],
  ['a plain page with an import map', importMapApp, ['static']],
];

describe('the npm package in bundled apps', { timeout: 900_000 }, () => {
  let scratch;
  let tarball;

  before(() => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'inferno-bundlers-'));
    tarball = pack(path.join(scratch, 'dist'));
  });

  after(() => {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  test('the tarball carries a LICENSE, one entry point, and a README an npm user can follow', () => {
    const unpacked = path.join(scratch, 'unpacked');
    mkdirSync(unpacked);
    execFileSync('tar', ['xzf', tarball, '-C', unpacked]);
    const dir = path.join(unpacked, 'package');
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
    assert.deepEqual(Object.keys(manifest.exports), ['.', './package.json']);
    assert.match(readFileSync(path.join(dir, 'LICENSE'), 'utf8'), /MIT License[\s\S]*Apache License/);
    const readme = readFileSync(path.join(dir, 'README.md'), 'utf8');
    assert.match(readme, /import \{ Inferno \} from 'inferno-web'/);
    assert.match(readme, /Cross-Origin-Embedder-Policy: require-corp/);
    // Nothing an npm user lacks: the repository's folders and scripts.
    assert.doesNotMatch(readme, /\b(www|scripts|tests|src)\/|build\.sh|cargo /);
  });

  for (const [name, kind, modes] of APPS) {
    describe(name, () => {
      let app;
      before(() => {
        app = kind.setup(scratch, tarball);
      });
      for (const mode of modes) {
        for (const isolated of [true, false]) {
          const threads = isolated ? 2 : 1;
          test(`${mode}, ${isolated ? 'cross-origin isolated' : 'not isolated'}: chats on ${threads} thread(s)`, async () => {
            const server = await kind.serve(app, mode, isolated);
            if (kind.compressesModels && mode === 'build') {
              // Vite's preview server gzips the model, so it comes without a usable length.
              const probe = await fetch(new URL('model.gguf', server.url), {
                headers: { 'accept-encoding': 'gzip' },
              });
              await probe.body?.cancel();
              assert.equal(probe.headers.get('content-encoding'), 'gzip', 'the model is served compressed');
            }
            h.problems = [];
            const context = await h.browser.newContext();
            try {
              const tab = await context.newPage();
              watchForProblems(tab);
              await tab.goto(server.url);
              await tab.waitForFunction(() => window.__result !== undefined, null, { timeout: 120_000 });
              const result = await tab.evaluate(() => window.__result);
              assert.equal(result.failed, undefined, `the app failed: ${JSON.stringify(result.failed)}`);
              assert.equal(result.isolated, isolated);
              assert.equal(result.threads, threads);
              assert.equal(result.build.includes('threads'), isolated, `the build: ${result.build}`);
              assert.ok(result.text.trim().length > 0, 'an answer');
            } finally {
              await context.close();
              await server.close();
            }
            assert.deepEqual(h.problems, [], 'the app logged errors');
          });
        }
      }
    });
  }
});
