// `--ladder`: the steps from a bare forwarder to payments-gate, valid sales. Each step is the one below it
// plus one thing the gateway does, so that the rounds say what each costs. The ladder starts from (u)
// (undici.js: the body read whole and forwarded as it came), and the next two steps forward with the same
// bare undici forwarder (undici-forward.js), the engine the gateway forwards payments with:
//   parsed    ... parsed, and the document forwarded re-serialized (the backend gets the validated document)
//   checked   ... every check of the core on it (cached BasicAuth, headers, body, schema, policy, rewrites)
//   gateway   payments-gate itself (createGateway) without logs and metrics, the store of retry protection
//             named by BENCH_IDEMPOTENCY (the ladder runs it with `off`, then `memory`)
import { createServer } from 'node:http'
import { buildGate, fromEnv, startGateway } from '../../lib/gateway.js'
import { serve, target } from './child.js'
import { readWhole, undiciForwarder } from './undici-forward.js'

const step = process.env.BENCH_STEP

if (step === 'gateway') {
  await serve((await startGateway({ ...fromEnv(), logs: false, metrics: false })).server)
} else {
  const { checks } = await buildGate({ ...fromEnv(), idempotency: 'off' })
  const forward = undiciForwarder(target())
  const reserialized = (document) => Buffer.from(JSON.stringify(document))
  if (step !== 'parsed' && step !== 'checked') throw new Error(`BENCH_STEP: unknown step ${step}`)
  const handle =
    step === 'parsed'
      ? (req, res, body) => forward(req, res, reserialized(JSON.parse(body.toString())))
      : async (req, res, body) => {
          let principal = checks.authenticate(req.headers.authorization)
          if (principal instanceof Promise) principal = await principal
          const verdict = 'ok' in principal ? principal : checks.check('sale', req.headers, body, principal)
          if (!verdict.ok) return refuse(res, verdict.status)
          forward(req, res, reserialized(verdict.document))
        }
  await serve(createServer((req, res) => readWhole(req, res, (body) => handle(req, res, body))))
}

function refuse(res, status) {
  res.writeHead(status, { 'content-length': 0 })
  res.end()
}
