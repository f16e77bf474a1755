/**
 * The Node lines served, checked before anything that would fail on an older one is loaded: on Node 20 a
 * dependency's module throws as it loads, a stack trace where one line is due (docs/cli.md, exit codes).
 * This module imports nothing, so that an entry point can load it first on any Node.
 */

/** The oldest Node line served: package.json's `engines`. */
export const NODE_MIN = 24

/** What an unsupported Node is told: the versions served. Undefined on a Node served. */
export function unsupportedNode(version: string): string | undefined {
  if (Number(version.split('.')[0]) >= NODE_MIN) return undefined
  return `Node ${version} is not supported; run payments-gate on Node ${NODE_MIN} or later (Node 24 and 26 are the lines tested)`
}

/** Throws the one line on a Node not served: the library's first import, evaluated before the others. */
export function refuseUnsupportedNode(version: string): void {
  const refusal = unsupportedNode(version)
  if (refusal !== undefined) throw new Error(`payments-gate: ${refusal}`)
}

/** Runs the command line on a Node served; on another, writes the one line and gives exit code 2, nothing else loaded. */
export async function onSupportedNode(
  version: string,
  stderr: { write(line: string): unknown },
  run: () => Promise<number>,
): Promise<number> {
  const refusal = unsupportedNode(version)
  if (refusal === undefined) return run()
  stderr.write(`payments-gate: ${refusal}\n`)
  // EXIT_USAGE (cli/io.ts), which this module cannot import: it imports nothing.
  return 2
}
