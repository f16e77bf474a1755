// `--ladder`, refusals: the steps from node's own floor to payments-gate answering (d), the sale with three
// field mistakes refused with 400 bodyDoesNotMatchSchema. Each step is the one below it plus one thing the
// gateway does for such a request, so that the rounds say what a refusal pays for beyond node's cost of
// reading a request and answering it:
//   floor     a bare `node:http` server: the body read whole, the gateway's own 400 answer (the same
//             bytes and headers, computed once at start-up) sent as it is
//   parsed    ... the body parsed
//   checked   ... every check of the core instead (cached BasicAuth, headers, parse, the schema check and
//             its error walk), the precomputed answer still sent
//   answered  ... the answer built from the refusal (lib/http/answer.ts: the error body serialized)
//   gateway   payments-gate itself (createGateway) without logs and metrics
import { createServer } from 'node:http'
import { invalidSale, bytesOf } from '../../lib/fixtures.js'
import { buildGate, fromEnv, gatePackage, startGateway } from '../../lib/gateway.js'
import { serve } from './child.js'
import { readWhole } from './undici-forward.js'

const step = process.env.BENCH_STEP

if (step === 'gateway') {
  await serve((await startGateway({ ...fromEnv(), logs: false, metrics: false })).server)
} else {
  if (!['floor', 'parsed', 'checked', 'answered'].includes(step)) throw new Error(`BENCH_STEP: unknown step ${step}`)
  const { answerOf, sendRejection } = gatePackage
  const { checks } = await buildGate({ ...fromEnv(), idempotency: 'off' })
  const fixed = answerOf(checks.checkBody('sale', bytesOf(invalidSale())))
  if (fixed.status !== 400) throw new Error(`the invalid sale is answered ${fixed.status}, expected 400`)
  const answerFixed = (res) => {
    res.writeHead(fixed.status, fixed.headers)
    res.end(fixed.body)
  }
  const handle =
    step === 'floor'
      ? (_req, res) => answerFixed(res)
      : step === 'parsed'
        ? (_req, res, body) => {
            JSON.parse(body.toString())
            answerFixed(res)
          }
        : async (req, res, body) => {
            let principal = checks.authenticate(req.headers.authorization)
            if (principal instanceof Promise) principal = await principal
            const verdict = 'ok' in principal ? principal : checks.check('sale', req.headers, body, principal)
            if (verdict.ok) throw new Error('the invalid sale passed')
            if (step === 'checked') answerFixed(res)
            else sendRejection(res, verdict)
          }
  await serve(createServer((req, res) => readWhole(req, res, (body) => handle(req, res, body))))
}
