// Imported first by the package's entry point (src/index.ts): on a Node.js too old for df-worker, importing
// the package throws one UnsupportedNodeError naming the version needed, before any other module loads.
import { nodeVersionProblem, UnsupportedNodeError } from './node-version.ts';

const problem = nodeVersionProblem();
if (problem !== undefined) throw new UnsupportedNodeError(problem);
