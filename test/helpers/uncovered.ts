// It imports nothing, so that any test may use it without loading more.

/**
 * `node ARGS` (or another program) for a child outside the coverage (`_TAPJS_PROCESSINFO_COVERAGE_` 0 in `env`), as
 * `[command, args]`: through /usr/bin/env, which sets the child's NODE_OPTIONS to `env`'s own. tap adds its
 * process-info hook to the NODE_OPTIONS of every process spawned here; a child that measures no coverage would still
 * load it, and it records each module the child loads.
 */
export function uncovered(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  node = process.execPath,
): [string, string[]] {
  return ['/usr/bin/env', [`NODE_OPTIONS=${env.NODE_OPTIONS ?? ''}`, node, ...args]]
}
