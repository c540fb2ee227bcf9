// The handlers a dev session serves: loaded as the daemon loads them (in a thread, with the handlers'
// environment), the emulator's tasks brought in line with their declarations, and what changed since the last
// load said in a line or two. A module that fails to load is left out, so its task pauses until it loads again.
import path from 'node:path';
import type { WorkerConfig } from '../../config/schema.ts';
import type { Emulator } from '../../emulator/index.ts';
import type { LoadedHandler } from '../../handlers/loader.ts';
import { handlerEnvironmentFromConfig, loadHandlersIsolatedPartly } from '../../sandbox/index.ts';
import { parseTask } from '../../api/validate.ts';
import { describeEntry, planTaskSync } from '../shared/task-sync-plan.ts';

export class HandlerSet {
  readonly #config: WorkerConfig;
  readonly #emulator: Emulator;
  readonly #say: (line: string) => void;
  /** Task key → file of the handlers served now. */
  #served = new Map<string, string>();
  /** Task key → file of the handlers paused because their file no longer loads. */
  #paused = new Map<string, string>();

  constructor(config: WorkerConfig, emulator: Emulator, say: (line: string) => void) {
    this.#config = config;
    this.#emulator = emulator;
    this.#say = say;
  }

  /**
   * Loads the handler modules and syncs the emulator's tasks to them; prints what changed (files: what the
   * watcher saw, for the first line of a reload). Throws HandlersDirectoryError for an unusable folder.
   */
  async load(files?: string[]): Promise<Map<string, LoadedHandler>> {
    const dir = this.#config.handlers.dir;
    const { handlers, errors } = await loadHandlersIsolatedPartly(dir, {
      env: handlerEnvironmentFromConfig(this.#config),
    });
    if (files !== undefined) {
      this.#say(`↻ ${files.length > 0 ? files.join(', ') : 'handlers'} changed: handlers reloaded`);
    }
    const synced = this.#sync(handlers);
    if (files === undefined && synced.length > 0)
      this.#say("tasks synced to the emulator from the handlers' declarations:");
    for (const line of synced) this.#say(`  ${line}`);

    const failed = new Set(errors.map((e) => path.resolve(e.file)));
    const paused = new Map<string, string>();
    for (const [key, file] of [...this.#served, ...this.#paused]) {
      if (!handlers.has(key) && failed.has(path.resolve(file))) paused.set(key, file);
    }
    for (const error of errors) this.#say(`✖ ${relative(error.message)}`);
    for (const key of paused.keys()) {
      if (!this.#paused.has(key)) {
        this.#say(`  task ${key} paused: not polled until its file loads again (new executions wait)`);
      }
    }
    for (const key of this.#paused.keys()) {
      if (handlers.has(key)) this.#say(`  task ${key} resumed`);
    }
    if (files !== undefined) {
      for (const key of this.#served.keys()) {
        if (!handlers.has(key) && !paused.has(key)) this.#say(`  task ${key} no longer served (no handler)`);
      }
    }
    this.#served = new Map([...handlers].map(([key, h]) => [key, h.file]));
    this.#paused = paused;
    return handlers;
  }

  /** Creates the tasks the emulator lacks and updates those that differ; lines of what was done. */
  #sync(handlers: ReadonlyMap<string, LoadedHandler>): string[] {
    // Read as the client reads them, so a task's extra fields are kept by an update as `tasks sync` keeps them.
    const tasks = this.#emulator.tasks().map((task) => parseTask('tasks.list', task));
    const plan = planTaskSync(tasks, handlers);
    const lines: string[] = [];
    for (const entry of plan.entries) {
      if (entry.action === 'create') this.#emulator.createTask(entry.definition);
      else if (entry.action === 'update') this.#emulator.updateTask(entry.taskId, entry.definition);
      else continue;
      lines.push(describeEntry(entry));
    }
    return lines;
  }
}

/** A message naming files by absolute path, with the paths shown relative to the working directory. */
function relative(message: string): string {
  const cwd = process.cwd() + path.sep;
  return message.split(cwd).join('');
}
