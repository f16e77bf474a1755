import { context, propagation, trace } from '@opentelemetry/api'
import { CodedError } from '../coded-error.js'

type Env = Readonly<Record<string, string | undefined>>

/**
 * Whether the standard OpenTelemetry variables ask for traces over OTLP
 * (docs/tracing.md): an endpoint set, `OTEL_TRACES_EXPORTER` unset or
 * `otlp`, and the SDK not disabled.
 */
export function tracingRequested(env: Env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false
  const exporter = env.OTEL_TRACES_EXPORTER?.trim() || 'otlp'
  if (exporter !== 'otlp') return false
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT)
}

/** The registered SDK: `shutdown` sends the spans still waiting, then unregisters it. */
export interface Tracing {
  shutdown(): Promise<void>
}

/**
 * Starts the OpenTelemetry SDK when the variables ask for it, before the
 * gateway is built (it asks for a tracer once). Without them nothing of the
 * SDK is loaded. The exporter, the sampler and the resource read the
 * standard variables themselves (endpoint, headers, `OTEL_TRACES_SAMPLER`,
 * `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`).
 */
export async function startTracing(env: Env): Promise<Tracing | undefined> {
  if (!tracingRequested(env)) return undefined
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf').trim()
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    throw new CodedError('EUSAGE', `OTEL_EXPORTER_OTLP_PROTOCOL: ${protocol} is not supported; use http/protobuf or http/json`)
  }
  const [{ NodeTracerProvider, BatchSpanProcessor }, { defaultResource, detectResources, envDetector, resourceFromAttributes }, { OTLPTraceExporter }] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
    protocol === 'http/json' ? import('@opentelemetry/exporter-trace-otlp-http') : import('@opentelemetry/exporter-trace-otlp-proto'),
  ])
  // The service is named payments-gate unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'payments-gate' }))
    .merge(detectResources({ detectors: [envDetector] }))
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] })
  // No context manager: the proxy hands every span its parent itself, and AsyncLocalStorage would tax every promise of the process.
  provider.register({ contextManager: null })
  return {
    async shutdown() {
      await provider.shutdown()
      trace.disable()
      context.disable()
      propagation.disable()
    },
  }
}
