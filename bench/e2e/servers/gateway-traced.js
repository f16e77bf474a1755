// (ct): (c) with tracing on. The OpenTelemetry SDK is started as `payments-gate serve` starts it (from the
// OTEL_ variables the parent sets: its local receiver, http/protobuf, every request sampled), then the gateway.
import { startTracing } from '../../../dist/cli/tracing.js'
import { fromEnv, startGateway } from '../../lib/gateway.js'
import { serve } from './child.js'

if ((await startTracing(process.env)) === undefined)
  throw new Error('tracing did not start: OTEL_EXPORTER_OTLP_ENDPOINT unset')
await serve((await startGateway(fromEnv())).server)
