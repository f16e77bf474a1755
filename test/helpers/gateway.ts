import { Writable } from 'node:stream'
import type { Test } from 'tap'
import { CredentialStore, hashPassword } from '../../lib/credentials.js'
import { createGate, type Gate, type GateOptions } from '../../lib/gate.js'
import { createLogger, type Logger } from '../../lib/log.js'
import { luhnValid } from '../../lib/luhn.js'
import { createMetrics, type Metrics } from '../../lib/metrics.js'
import { loadPolicyDir } from '../../lib/policy/load.js'
import { createGateway, type Gateway, type GatewayOptions } from '../../lib/surfaces/proxy/server.js'
import { startBackend, type Answer, type Backend } from './backend.js'
import { basic } from './payments.js'

/** Every log line written by a logger of `captureLogger`, in this test process. */
export const logLines: string[] = []

export function captureLogger(): Logger {
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') logLines.push(line)
      done()
    },
  })
  return createLogger({ destination })
}

/** Log lines as objects, for assertions on their fields. */
export function loggedRequests(): Record<string, unknown>[] {
  return logLines.map((line) => JSON.parse(line) as Record<string, unknown>)
}

/** Asserts that no captured log line holds a whole card number (any Luhn-valid run of 12 to 19 digits). */
export function scanLogsForCards(t: Test): void {
  t.test('no log line holds a whole card number', async (t) => {
    t.ok(logLines.length > 0, 'lines were logged')
    const whole = logLines.filter((line) => (line.match(/[0-9]{12,19}/g) ?? []).some(luhnValid))
    t.same(whole, [])
  })
}

export const USER = 'shop-1'
export const PASSWORD = 'correct horse battery staple'
export const AUTH = basic(USER, PASSWORD)
/** A cheap scrypt cost: the tests check the flow, not the hash's strength. */
const TEST_COST = { N: 1024, r: 8, p: 1 }

let users: Promise<CredentialStore> | undefined
export function testCredentials(): Promise<CredentialStore> {
  users ??= hashPassword(PASSWORD, TEST_COST).then(
    (password) => new CredentialStore([{ username: USER, password, entities: ['default', 'marketplace', 'collections'] }]),
  )
  return users
}

export interface Started {
  readonly gate: Gate
  readonly gateway: Gateway
  readonly backend: Backend
  readonly url: string
  readonly port: number
  readonly metrics: Metrics
}

export interface StartOptions extends Partial<Omit<GatewayOptions, 'gate'>> {
  answer?: Answer
  gate?: Partial<GateOptions>
}

/** A backend and a gateway in front of it, both on loopback, both closed when the test ends. */
export async function startGateway(t: Test, options: StartOptions = {}): Promise<Started> {
  const backend = await startBackend(options.answer)
  t.teardown(() => backend.close())
  const { policies } = await loadPolicyDir('policies')
  // Retry protection off unless a test asks for it: these tests send the same payment again on purpose.
  const gate = await createGate({ policies, credentials: await testCredentials(), idempotency: 'off', ...options.gate })
  t.teardown(() => gate.close())
  const metrics = options.metrics ?? createMetrics({ defaultMetrics: false })
  const gateway = createGateway({ target: backend.url, logger: captureLogger(), ...options, metrics, gate })
  const { port } = await gateway.listen(0, '127.0.0.1')
  t.teardown(() => gateway.drain(0))
  return { gate, gateway, backend, url: `http://127.0.0.1:${port}`, port, metrics }
}
