// A fresh transactionReference in every request a load generator sends. The gateway's retry protection
// answers a repeated reference with the recorded answer instead of forwarding it, so a load that repeated
// one body would measure replays, not forwarded payments. Each reference has the width of the one in the
// fixture (a run prefix and a zero-padded counter), so every body keeps its size and targets stay comparable.
import { randomBytes } from 'node:crypto'

/** Differs between runs, so that a gateway with a shared store (Redis) never sees a reference of an earlier run. */
const RUN = randomBytes(3).toString('hex')
let sequence = 0

/**
 * A function that returns the JSON body `bytes` (a string) with a reference no
 * other request of this process has carried. The body is cut once around its
 * reference; each call only joins three strings.
 */
export function freshBodies(bytes) {
  const text = bytes.toString()
  const reference = JSON.parse(text).transactionReference
  const field = `"transactionReference":${JSON.stringify(reference)}`
  const at = text.indexOf(field)
  const width = typeof reference === 'string' ? reference.length - RUN.length - 1 : 0
  if (at < 0 || width < 8)
    throw new Error('freshBodies: the body needs a transactionReference of at least 15 characters')
  const head = `${text.slice(0, at)}"transactionReference":"${RUN}-`
  const tail = text.slice(at + field.length - 1)
  return () => `${head}${String(++sequence).padStart(width, '0')}${tail}`
}
