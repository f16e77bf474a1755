#!/usr/bin/env node
// The only static import is the Node check: the command line is imported once the Node is one served.
import { onSupportedNode } from './node-version.js'

process.exitCode = await onSupportedNode(process.versions.node, process.stderr, async () => {
  const { main } = await import('./cli/main.js')
  return main(process.argv.slice(2), {
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
  })
})
