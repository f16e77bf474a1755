import { Agent, createServer, type RequestListener, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { createGate, type Gate, type GateOptions } from '../../lib/gate.js'
import { GATE_OPTIONS, POLICIES_DIR, writeCredentials } from './cases.js'

/** A gate on the sample policies and a real credentials file, closed when the test ends. */
export async function testGate(t: Test, options: Partial<GateOptions> = {}): Promise<Gate> {
  const gate = await createGate({ ...GATE_OPTIONS, policies: POLICIES_DIR, credentials: await writeCredentials(t.testdir()), ...options })
  t.teardown(() => gate.close())
  return gate
}

/** A logger that keeps what it is given. */
export function memoryLogger(): { lines: { object: object; message?: string }[]; info(): void; warn(): void; error(object: object, message?: string): void } {
  const lines: { object: object; message?: string }[] = []
  return { lines, info() {}, warn() {}, error: (object, message) => lines.push({ object, message }) }
}

/** A node server for `handler` on a free loopback port, with a keep-alive agent; both closed when the test ends. */
export async function serveOnLoopback(t: Test, handler: RequestListener): Promise<{ server: Server; port: number; agent: Agent }> {
  const server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const agent = new Agent({ keepAlive: true })
  t.teardown(() => {
    agent.destroy()
    server.closeAllConnections()
    server.close()
  })
  return { server, port: (server.address() as AddressInfo).port, agent }
}
