// `--ladder`: the steps from (b) to (c). Each is (b)'s pass-through (the same
// http-proxy-3 set-up and keep-alive pool) plus one more thing that the
// contract or the gateway does, so that the rounds say what each one costs:
//   read     the whole body is read before anything is forwarded, and sent as one buffer
//   parsed   ... parsed and sent re-serialized (the backend gets the validated document)
//   checked  ... every check of the core (cached BasicAuth, headers, body, schema, policy, rewrites)
//   quiet    payments-gate itself (createGateway) without logs and metrics
import { Agent, createServer } from 'node:http'
import { createProxyServer } from 'http-proxy-3'
// The ladder emulates the gateway's own body read, so it takes it from the build directly.
import { readBody } from '../../../dist/http/read-body.js'
import { buildGate, fromEnv, startGateway } from '../../lib/gateway.js'
import { serve, target } from './child.js'

const step = process.env.BENCH_STEP
const { checks } = await buildGate(fromEnv())

if (step === 'quiet') {
  await serve((await startGateway({ ...fromEnv(), logs: false, metrics: false })).server)
} else {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 })
  const proxy = createProxyServer({ target: target(), agent, xfwd: true })
  proxy.on('error', (_error, _req, res) => refuse(res, 502))
  await serve(createServer((req, res) => forward(req, res).catch(() => refuse(res, 500))))

  async function forward(req, res) {
    let principal
    if (step === 'checked') {
      principal = checks.authenticate(req.headers.authorization)
      if (principal instanceof Promise) principal = await principal
    }
    const bytes = await readBody(req, checks.bodyLimit)
    if (!Buffer.isBuffer(bytes)) return refuse(res, 400)
    let payload = bytes
    if (step === 'parsed') payload = Buffer.from(JSON.stringify(JSON.parse(bytes.toString())))
    if (step === 'checked') {
      const verdict = checks.check('sale', req.headers, bytes, principal)
      if (!verdict.ok) return refuse(res, verdict.status)
      payload = Buffer.from(JSON.stringify(verdict.document))
    }
    req.headers['content-length'] = String(payload.length)
    // The gateway's way of handing http-proxy-3 a body already read (lib/proxy/forward.ts).
    proxy.web(req, res, { buffer: { pipe: (destination) => destination.end(payload) } })
  }
}

function refuse(res, status) {
  if (res.headersSent) return res.destroy()
  res.writeHead(status, { 'content-length': 0 })
  res.end()
}
