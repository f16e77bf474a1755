/** A real OTLP/HTTP trace receiver on loopback, decoding what the exporters send in either protocol. */
import type { Test } from 'tap'
import { serveOnLoopback } from './servers.js'

export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  /** Empty for a root span. */
  readonly parentSpanId: string
  readonly name: string
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  readonly kind: number
  readonly attributes: Readonly<Record<string, string | number | boolean>>
  /** `service.name` of its resource. */
  readonly service: string
  /** Its status code: 2 error, else 0 or 1. */
  readonly status: number
}

export interface Export {
  readonly path: string
  readonly contentType: string | undefined
  readonly body: Buffer
}

export interface Receiver {
  /** Its base URL, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly url: string
  readonly exports: Export[]
  /** Every span received so far, decoded. */
  spans(): ReceivedSpan[]
}

export async function startReceiver(t: Test): Promise<Receiver> {
  const exports: Export[] = []
  const { port } = await serveOnLoopback(t, (req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const contentType = req.headers['content-type']
      exports.push({ path: req.url as string, contentType, body: Buffer.concat(chunks) })
      if (contentType === 'application/json') res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
    })
  })
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    spans: () =>
      exports.flatMap((received) =>
        received.contentType === 'application/json' ? fromJson(received.body) : fromProtobuf(received.body),
      ),
  }
}

interface JsonValue {
  stringValue?: string
  intValue?: string | number
  boolValue?: boolean
  doubleValue?: number
}
interface JsonKeyValue {
  key: string
  value: JsonValue
}

function jsonAttributes(list: JsonKeyValue[] = []): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {}
  for (const { key, value } of list)
    out[key] = value.stringValue ?? value.boolValue ?? value.doubleValue ?? Number(value.intValue)
  return out
}

function fromJson(body: Buffer): ReceivedSpan[] {
  const request = JSON.parse(body.toString()) as { resourceSpans: any[] }
  return request.resourceSpans.flatMap((resourceSpans) => {
    const service = String(jsonAttributes(resourceSpans.resource.attributes)['service.name'])
    return resourceSpans.scopeSpans.flatMap((scope: any) =>
      scope.spans.map((span: any) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind,
        attributes: jsonAttributes(span.attributes),
        service,
        status: span.status?.code ?? 0,
      })),
    )
  })
}

/** Protobuf's wire format, as far as OTLP's trace messages need it: field number to its values. */
type Fields = Map<number, (Buffer | bigint)[]>

function decode(bytes: Buffer): Fields {
  const fields: Fields = new Map()
  let at = 0
  const varint = (): bigint => {
    let value = 0n
    for (let shift = 0n; ; shift += 7n) {
      const byte = bytes[at++] as number
      value |= BigInt(byte & 0x7f) << shift
      if (byte < 0x80) return value
    }
  }
  while (at < bytes.length) {
    const key = Number(varint())
    const wire = key & 7
    let value: Buffer | bigint
    if (wire === 0) value = varint()
    else if (wire === 2) {
      const length = Number(varint())
      value = bytes.subarray(at, at + length)
      at += length
    } else {
      const width = wire === 1 ? 8 : 4
      value = bytes.subarray(at, at + width)
      at += width
    }
    const list = fields.get(key >> 3) ?? []
    list.push(value)
    fields.set(key >> 3, list)
  }
  return fields
}

const all = (fields: Fields, field: number) => (fields.get(field) ?? []) as Buffer[]
const one = (fields: Fields, field: number) => fields.get(field)?.[0]

function protobufAttributes(list: Buffer[]): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {}
  for (const entry of list) {
    const keyValue = decode(entry)
    const value = decode(one(keyValue, 2) as Buffer)
    const string = one(value, 1)
    const bool = one(value, 2)
    out[(one(keyValue, 1) as Buffer).toString()] =
      string !== undefined ? (string as Buffer).toString() : bool !== undefined ? bool === 1n : Number(one(value, 3))
  }
  return out
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  return all(decode(body), 1).flatMap((resourceSpansBytes) => {
    const resourceSpans = decode(resourceSpansBytes)
    const service = String(protobufAttributes(all(decode(one(resourceSpans, 1) as Buffer), 1))['service.name'])
    return all(resourceSpans, 2).flatMap((scope) =>
      all(decode(scope), 2).map((spanBytes) => {
        const span = decode(spanBytes)
        const status = one(span, 15)
        return {
          traceId: (one(span, 1) as Buffer).toString('hex'),
          spanId: (one(span, 2) as Buffer).toString('hex'),
          parentSpanId: ((one(span, 4) as Buffer | undefined) ?? Buffer.alloc(0)).toString('hex'),
          name: (one(span, 5) as Buffer).toString(),
          kind: Number(one(span, 6)),
          attributes: protobufAttributes(all(span, 9)),
          service,
          status: status === undefined ? 0 : Number(one(decode(status as Buffer), 3) ?? 0n),
        }
      }),
    )
  })
}
