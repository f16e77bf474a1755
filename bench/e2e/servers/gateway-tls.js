// (cs) and (cb): (c) with TLS, its certificate files read as `payments-gate serve` reads them: on the listener
// (BENCH_LISTEN_CERT, BENCH_LISTEN_KEY: --tls-cert, --tls-key), or to an https backend (BENCH_TARGET_CA: --target-ca).
import { loadCertificates } from '../../../dist/cli/certificates.js'
import { fromEnv, startGateway } from '../../lib/gateway.js'
import { serve } from './child.js'

const env = process.env
const options = fromEnv()
const flags = {
  target: new URL(options.target),
  tlsCert: env.BENCH_LISTEN_CERT || undefined,
  tlsKey: env.BENCH_LISTEN_KEY || undefined,
  targetCa: env.BENCH_TARGET_CA || undefined,
}
const certificates = await loadCertificates(flags, (key) => key)
await serve((await startGateway({ ...options, tls: certificates.listener, targetTls: certificates.target })).server)
