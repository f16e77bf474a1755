// npm test's first step (package.json's pretest): exits 0 when tap's test class, which every test file loads, is
// already built with the plugins package.json names, and 1 when `tap build` must build it (a fresh clone, a changed
// list, or anything here failing). The runner compares the same two signatures, but rebuilds too late for a fresh
// clone's first run; a build takes seconds, so it runs only when needed.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

try {
  const { TapConfig } = await import('@tapjs/config')
  const { pluginSignature } = await TapConfig.load()
  const built = readFileSync(fileURLToPath(import.meta.resolve('@tapjs/test/test-built')), 'utf8')
  process.exitCode = /^export const signature = `([^`]*)`;$/m.exec(built)?.[1] === pluginSignature ? 0 : 1
} catch {
  process.exitCode = 1
}
