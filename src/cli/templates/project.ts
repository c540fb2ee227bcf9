// The files `df-worker init` writes besides the handler and its test: an ES module package that depends on
// df-worker, a tsconfig for erasable TypeScript run by Node's type stripping, an image built FROM df-worker's, and
// a README that says how to run it all.
import { SAMPLE_INPUT } from './handler.ts';

/** What the project's files depend on; every field is filled in by `init` from the running package. */
export interface ProjectTemplate {
  /** The npm package name of the new project (its folder's name, made valid). */
  name: string;
  /** The task key of the starter handler. */
  taskKey: string;
  /** The dependency spec of df-worker in package.json, e.g. `^0.1.0` or `file:/path/df-worker-0.1.0.tgz`. */
  packageSpec: string;
  /** df-worker's version: the tag of the image the Dockerfile builds on. */
  version: string;
  /** The Node.js range df-worker supports (its `engines.node`). */
  nodeRange: string;
  /** Version ranges of the development tools (vitest for the handler tests, @types/node for editors and tsc). */
  devDependencies: Readonly<Record<string, string>>;
}

export function packageJsonSource(t: ProjectTemplate): string {
  const manifest = {
    name: t.name,
    version: '0.1.0',
    private: true,
    // Handlers are ES modules: with "type": "module", `.ts` files load as such (no `.mts` needed).
    type: 'module',
    engines: { node: t.nodeRange },
    scripts: {
      dev: 'df-worker dev',
      test: 'vitest run',
      check: 'df-worker check',
      start: 'df-worker start',
    },
    dependencies: { 'df-worker': t.packageSpec },
    devDependencies: t.devDependencies,
  };
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

/** Type-checks what Node runs as is: erasable syntax only, `.ts` imports, no emit. */
export function tsconfigSource(): string {
  return `{
  "compilerOptions": {
    "target": "es2024",
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "types": ["node"],
    "strict": true,
    "noEmit": true,
    "erasableSyntaxOnly": true,
    "allowImportingTsExtensions": true,
    "verbatimModuleSyntax": true,
    "skipLibCheck": true
  },
  "include": ["handlers"]
}
`;
}

export function dockerfileSource(t: ProjectTemplate): string {
  return `# The df-worker image with this project's handlers in /app/handlers, run as the image's non-root user.
# Build df-worker's own image first, tagged df-worker:${t.version} (its helm/README.md, "Container image"), or change
# FROM to the registry that holds it. Handlers import 'df-worker' from the image; a handler that imports other npm
# packages needs them installed in the image too.
FROM df-worker:${t.version}
USER root
RUN rm -rf /app/handlers/*
COPY handlers/ /app/handlers/
USER 1000:1000
`;
}

/** Tests import vitest, which the image does not have; the loader skips them, so they stay out. */
export function dockerignoreSource(): string {
  return ['node_modules', '.state', '.env', '.env.*', '**/*.test.ts', '**/*.md', ''].join('\n');
}

export function gitignoreSource(): string {
  return ['node_modules/', '.state/', 'coverage/', '*.log', '.env', '.env.*', ''].join('\n');
}

export function readmeSource(t: ProjectTemplate): string {
  const input = JSON.stringify(SAMPLE_INPUT);
  return `# ${t.name}

Data Factory custom task handlers, run by [df-worker](https://github.com/df-worker/df-worker). Each module in
\`handlers/\` is one task: \`handlers/${t.taskKey}.ts\` is the starter, with its test beside it.

\`\`\`sh
npm i
npm run dev         # the emulator, the worker and a reload on every edit, on this machine
npx df-worker dev --enqueue ${t.taskKey} '${input}'   # from another terminal
npm test            # the handlers' tests (vitest)
npm run check       # loads the handlers and the configuration
npx df-worker new another-task
\`\`\`

Against the service: \`DF_API_URL=... DF_API_KEY=... npx df-worker tasks sync\`, then \`npm start\` with the same
settings. The image: \`docker build -t ${t.name} .\` (see \`Dockerfile\`). Writing handlers, \`ctx\` and the commands:
\`node_modules/df-worker/handlers/README.md\`
([on GitHub](https://github.com/df-worker/df-worker/blob/main/handlers/README.md)).
`;
}
