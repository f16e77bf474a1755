import type { Test } from 'tap'
import { createGate, type Gate, type GateOptions } from '../../lib/create-gate.js'
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
