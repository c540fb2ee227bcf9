export * from './budget.ts';
export * from './month.ts';
export * from './sliding-window.ts';
export * from './store.ts';
