/**
 * The application of protected-apps.ts in a process of its own, behind a gate whose retry protection is
 * on a Redis the processes share: test/e2e/middleware-killed.test.ts kills it while handlers run.
 * Arguments: REDIS_URL IN_FLIGHT_SECONDS SURFACE...: one server a surface, behind the one gate. It prints
 * `listening SURFACE PORT` for each, then `started REFERENCE` whenever a handler begins.
 */
import type { AddressInfo } from 'node:net'
import { createGate } from '../../lib/gate.js'
import { FINGERPRINT_KEY, GATE_OPTIONS, POLICIES_DIR, testCredentials } from './fixtures.js'
import { Handling, protectedServer, type Surface } from './protected-apps.js'

const [redis, inFlight, ...surfaces] = process.argv.slice(2) as [string, string, ...Surface[]]
const gate = await createGate({
  ...GATE_OPTIONS,
  policies: POLICIES_DIR,
  credentials: await testCredentials(),
  idempotency: redis,
  idempotencyFingerprintKey: FINGERPRINT_KEY,
  idempotencyInFlight: Number(inFlight),
})
const handling = new Handling((reference) => process.stdout.write(`started ${reference}\n`))
for (const surface of surfaces) {
  const server = await protectedServer(surface, gate, handling)
  server.listen(0, '127.0.0.1', () =>
    process.stdout.write(`listening ${surface} ${(server.address() as AddressInfo).port}\n`),
  )
}
