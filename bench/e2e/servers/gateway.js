// (c), (c0), (cr) and (d): payments-gate as `payments-gate serve` sets it up (bench/lib/gateway.js),
// with the store of retry protection named by BENCH_IDEMPOTENCY (memory, off or redis://...).
import { fromEnv, startGateway } from '../../lib/gateway.js'
import { serve } from './child.js'

await serve((await startGateway(fromEnv())).server)
