// A gate opened in a node:cluster worker, as an application under its own cluster or PM2's cluster mode opens it:
// the primary forks one worker, which tries each `idempotency` given and prints what the gate did (`opened`, or
// the error's code and message), a line each.
import cluster from 'node:cluster'
import { createGate } from '../../lib/gate.js'
import { POLICIES_DIR } from './fixtures.js'

if (cluster.isPrimary) {
  cluster.fork().on('exit', (code) => process.exit(code ?? 1))
} else {
  const [credentials, ...specs] = process.argv.slice(2)
  for (const idempotency of specs) {
    try {
      const gate = await createGate({ credentials: credentials as string, policies: POLICIES_DIR, idempotency })
      await gate.close()
      console.log(`${idempotency}: opened`)
    } catch (error) {
      console.log(`${idempotency}: ${(error as { code?: string }).code} ${(error as Error).message}`)
    }
  }
  process.exit(0)
}
