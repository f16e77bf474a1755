import { CodedError } from '../coded-error.js'
import { DEFAULTS } from '../defaults.js'
import { openTelemetry } from '../tracing.js'

const { context, propagation, trace } = openTelemetry

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

/** The registered SDK. */
export interface Tracing {
  /**
   * Sends the spans still waiting, for at most `withinMs` (by default {@link flushBound}'s), then unregisters the SDK. Rejects when the collector
   * refused them or did not take them in time: they are dropped, and the SDK is unregistered all the same.
   */
  shutdown(withinMs?: number): Promise<void>
}

/** The sampler the standard variables name (docs/tracing.md): its root, and whether a parent's decision wins. */
export interface SamplerSetting {
  readonly parentBased: boolean
  readonly root: 'always_on' | 'always_off' | 'traceidratio'
  readonly ratio: number
}

const SAMPLERS: Readonly<Record<string, Omit<SamplerSetting, 'ratio'>>> = {
  always_on: { parentBased: false, root: 'always_on' },
  always_off: { parentBased: false, root: 'always_off' },
  traceidratio: { parentBased: false, root: 'traceidratio' },
  parentbased_always_on: { parentBased: true, root: 'always_on' },
  parentbased_always_off: { parentBased: true, root: 'always_off' },
  parentbased_traceidratio: { parentBased: true, root: 'traceidratio' },
}

/**
 * `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`, as the specification reads them; the SDK
 * (`@opentelemetry/sdk-trace` 3) no longer does. A value it does not know stops start-up. Unset, it is
 * `always_on`, not the specification's `parentbased_always_on`: the gateway is an edge, and there a
 * parent-based sampler lets any client's `traceparent` decide (docs/tracing.md, sampling at the edge).
 */
export function samplerSetting(env: Env): SamplerSetting {
  const name = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase() || 'always_on'
  const sampler = Object.hasOwn(SAMPLERS, name) ? SAMPLERS[name] : undefined
  if (sampler === undefined) {
    throw new CodedError(
      'EUSAGE',
      `OTEL_TRACES_SAMPLER: ${name} is not supported; use one of ${Object.keys(SAMPLERS).join(', ')}`,
    )
  }
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim() || '1'
  const ratio = Number(arg)
  if (sampler.root === 'traceidratio' && !(ratio >= 0 && ratio <= 1)) {
    throw new CodedError('EUSAGE', `OTEL_TRACES_SAMPLER_ARG="${arg}" must be a ratio from 0 to 1`)
  }
  return { ...sampler, ratio }
}

/** The batch span processor's settings from `OTEL_BSP_*`, which the SDK no longer reads itself; unset ones keep its defaults. */
export function batchSetting(env: Env): Record<string, number> {
  const setting: Record<string, number> = {}
  for (const [name, option] of BATCH_VARIABLES) {
    const text = env[name]?.trim()
    if (!text) continue
    const value = Number(text)
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new CodedError('EUSAGE', `${name}="${text}" must be a whole number, at least 1`)
    }
    setting[option] = value
  }
  return setting
}

/**
 * How long the stop's flush may take, in ms: `DEFAULTS.traceFlushMs`, or `OTEL_BSP_EXPORT_TIMEOUT` when that is shorter,
 * as the flush is one more export (docs/tracing.md).
 */
export function flushBound(batch: Readonly<Record<string, number>>): number {
  return Math.min(DEFAULTS.traceFlushMs, batch.exportTimeoutMillis ?? DEFAULTS.traceFlushMs)
}

const BATCH_VARIABLES = [
  ['OTEL_BSP_SCHEDULE_DELAY', 'scheduledDelayMillis'],
  ['OTEL_BSP_EXPORT_TIMEOUT', 'exportTimeoutMillis'],
  ['OTEL_BSP_MAX_QUEUE_SIZE', 'maxQueueSize'],
  ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 'maxExportBatchSize'],
] as const

/**
 * Starts the OpenTelemetry SDK when the variables ask for it, before the
 * gateway is built (it asks for a tracer once). Without them nothing of the
 * SDK is loaded. The exporter and the resource read the standard variables
 * themselves (endpoint, headers, timeout, `OTEL_SERVICE_NAME`,
 * `OTEL_RESOURCE_ATTRIBUTES`); the sampler and the batch settings are read
 * here. Registered as `NodeTracerProvider.register()` did before the SDK's 3.x
 * line: the provider, and the W3C trace-context and baggage propagators.
 */
export async function startTracing(env: Env): Promise<Tracing | undefined> {
  if (!tracingRequested(env)) return undefined
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf').trim()
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    throw new CodedError(
      'EUSAGE',
      `OTEL_EXPORTER_OTLP_PROTOCOL: ${protocol} is not supported; use http/protobuf or http/json`,
    )
  }
  const sampling = samplerSetting(env)
  const batch = batchSetting(env)
  const bound = flushBound(batch)
  const [sdk, core, { defaultResource, detectResources, envDetector, resourceFromAttributes }, { OTLPTraceExporter }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace'),
      import('@opentelemetry/core'),
      import('@opentelemetry/resources'),
      protocol === 'http/json'
        ? import('@opentelemetry/exporter-trace-otlp-http')
        : import('@opentelemetry/exporter-trace-otlp-proto'),
    ])
  // The service is named payments-gate unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'payments-gate' }))
    .merge(detectResources({ detectors: [envDetector] }))
  const roots = {
    always_on: sdk.AlwaysOnSampler,
    always_off: sdk.AlwaysOffSampler,
    traceidratio: sdk.TraceIdRatioBasedSampler,
  }
  const root = new roots[sampling.root](sampling.ratio)
  const sampler = sampling.parentBased ? new sdk.ParentBasedSampler({ root }) : root
  const processor = new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter(), ...batch })
  const provider = new sdk.TracerProvider({ resource, sampler, spanProcessors: [processor] })
  // No context manager: the proxy hands every span its parent itself, and AsyncLocalStorage would tax every promise of the process.
  trace.setGlobalTracerProvider(provider)
  propagation.setGlobalPropagator(
    new core.CompositePropagator({
      propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()],
    }),
  )
  return {
    async shutdown(withinMs = bound) {
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the spans still queued were not sent within ${withinMs} ms`)),
          withinMs,
        )
      })
      try {
        await Promise.race([provider.shutdown(), late])
      } finally {
        clearTimeout(timer)
        trace.disable()
        context.disable()
        propagation.disable()
      }
    },
  }
}
