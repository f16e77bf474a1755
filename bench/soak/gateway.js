// The soak's gateway child: payments-gate as `payments-gate serve` sets it up (bench/lib/gateway.js),
// run with --expose-gc so that it can report its memory after a full collection, when asked over IPC.
import { fromEnv, startGateway } from '../lib/gateway.js'
import { serve } from '../e2e/servers/child.js'

const gateway = await startGateway(fromEnv())

process.on('message', (message) => {
  if (message !== 'memory-after-gc') return
  // Two passes: the first can leave objects that only a second one finds unreachable (weak references, finalizers).
  globalThis.gc()
  globalThis.gc()
  const { rss, heapUsed } = process.memoryUsage()
  process.send({ afterGc: { rss, heapUsed } })
})
await serve(gateway.server)
