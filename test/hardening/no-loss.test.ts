import t from 'tap'
import { basic, saleBody } from '../helpers/fixtures.js'
import { keepAliveSender, paymentHeaders, type SendOptions } from '../helpers/http.js'
import { watchCrashes } from '../helpers/logs.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * No loss, no duplicates: N requests at once, each with its own
 * transactionReference, valid and invalid mixed, the backend answering after
 * varied delays so that requests overtake each other. The backend must
 * receive each valid one exactly once and no invalid one; every client must
 * get its answer.
 */
const N = 500
const noCrashes = watchCrashes(t)
const { url, backend } = await startGateway(t, {
  answer: (req, res, body) => {
    // A delay that varies by request, deterministic: 0-9 ms.
    const reference = JSON.parse(body.toString('utf8')).transactionReference as string
    setTimeout(
      () => res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ reference })),
      Number(reference.slice(-1)),
    )
  },
})
const post = keepAliveSender(t, url, 100)

type Kind = 'valid' | 'schema' | 'json' | 'unknownUser' | 'noAuth'
const KINDS: Kind[] = ['valid', 'valid', 'schema', 'json', 'unknownUser', 'valid', 'noAuth']

function request(kind: Kind, reference: string): SendOptions {
  const body = saleBody()
  body.transactionReference = reference
  const headers = paymentHeaders()
  if (kind === 'schema') body.instruction.value.currency = 'gbp'
  if (kind === 'unknownUser') headers.authorization = basic('intruder', 'x')
  if (kind === 'noAuth') delete headers.authorization
  const text = JSON.stringify(body)
  return { headers, body: kind === 'json' ? text.slice(0, -1) : text }
}

t.test(`${N} concurrent requests: each valid one reaches the backend exactly once, no invalid one ever`, async (t) => {
  const sent = Array.from({ length: N }, (_, i) => ({ kind: KINDS[i % KINDS.length] as Kind, reference: `ref-${i}` }))
  const replies = await Promise.all(sent.map(({ kind, reference }) => post(request(kind, reference))))
  const expected = (kind: Kind) => (kind === 'valid' ? 201 : kind === 'unknownUser' || kind === 'noAuth' ? 401 : 400)
  const wrong = sent.filter(({ kind }, i) => replies[i]?.status !== expected(kind))
  t.same(wrong, [], 'every client got its answer')
  const answeredFor = sent.filter(
    ({ kind }, i) => kind === 'valid' && replies[i]?.json.reference !== sent[i]?.reference,
  )
  t.same(answeredFor, [], 'each valid client got the backend answer to its own request')
  const received = backend.received
    .map((got) => JSON.parse(got.body.toString('utf8')).transactionReference as string)
    .sort()
  const valid = sent
    .filter(({ kind }) => kind === 'valid')
    .map(({ reference }) => reference)
    .sort()
  t.same(received, valid, 'the backend received exactly the valid ones, each once')
})

noCrashes()
