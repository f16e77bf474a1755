#!/usr/bin/env node
// The only static import is the Node check: the command line is imported once the Node is one served.
import { onSupportedNode } from './node-version.js'

const code = await onSupportedNode(process.versions.node, process.stderr, async () => {
  const [{ main }, { watchOutput }] = await Promise.all([import('./cli/main.js'), import('./cli/output.js')])
  watchOutput(process.stdout, process.stderr)
  return main(process.argv.slice(2), {
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
  })
})
// An output its stdout refused has set the code already (cli/output.ts): the command's does not replace it.
process.exitCode ??= code
