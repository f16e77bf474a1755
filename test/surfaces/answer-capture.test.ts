import t from 'tap'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import type { PaymentRequest } from '../../lib/schema/payment.js'
import { capturedResponse, type Settling } from '../../lib/surfaces/answer-capture.js'
import { THREW } from '../../lib/surfaces/retry-protection.js'
import {
  createRetryProtection,
  OVERSIZED_ANSWER,
  protectedPayment,
  UNKNOWN_ANSWER,
  type Guard,
} from '../../lib/proxy/retry-protection.js'
import { saleBody } from '../helpers/fixtures.js'

const payment = () => {
  const document = saleBody() as PaymentRequest
  return protectedPayment('sale', document.merchant.entity, document, document)
}

// The Fetch API's order of events pinned down, where a real client's leaving races the handler's next piece.
t.test('a Response whose reader is cancelled while a read is under way: read on to its end and recorded', async (t) => {
  const store = new MemoryIdempotencyStore({
    ttlMs: 60_000,
    inFlightMs: 30_000,
    oversizedAnswer: OVERSIZED_ANSWER,
    unknownAnswer: UNKNOWN_ANSWER,
  })
  const protection = createRetryProtection(store)
  const settling: Settling = {
    protection,
    inFlightMs: 30_000,
    unknownAnswer: UNKNOWN_ANSWER,
    threw: THREW,
    logger: undefined,
  }
  const claimed: Guard = await protection.guard(payment())
  if (claimed.kind !== 'forward' || claimed.ticket === undefined) throw new Error(`not claimed: ${claimed.kind}`)

  let release = (): void => undefined
  const released = new Promise<void>((resolve) => (release = resolve))
  let pulls = 0
  let secondPull = (): void => undefined
  const secondPulled = new Promise<void>((resolve) => (secondPull = resolve))
  const pieces = ['{"a":', '1}']
  const handlers = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const index = pulls++
      if (index === 1) {
        secondPull()
        await released
      }
      const piece = pieces[index]
      if (piece === undefined) controller.close()
      else controller.enqueue(Buffer.from(piece))
    },
  })
  const answer = capturedResponse(new Response(handlers, { status: 201 }), claimed.ticket, settling)
  const reader = (answer.body as ReadableStream<Uint8Array>).getReader()
  t.equal(Buffer.from((await reader.read()).value as Uint8Array).toString(), pieces[0])
  await secondPulled
  const cancelled = reader.cancel()
  release()
  await cancelled

  const retry = await protection.guard(payment())
  t.equal(retry.kind, 'replay', 'the claim was settled with the whole answer')
  if (retry.kind !== 'replay') return
  t.equal(retry.answer.status, 201)
  t.equal(Buffer.from(retry.answer.body ?? []).toString(), pieces.join(''))
})
