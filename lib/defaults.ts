/**
 * Every default of payments-gate, in one place: the library (`createGate`,
 * `createGateway`), the `serve` and `demo` commands and the documentation's
 * tables (docs/cli.md) all read them from here.
 */
export const DEFAULTS = Object.freeze({
  /** The `<vendor>` in `application/vnd.<vendor>.payments-v6+json`. */
  vendor: 'example',
  /** Prefix in front of `/payments/...`. */
  basePath: '',
  /** Largest request body read, in bytes. */
  bodyLimit: 65536,
  /** Folder of per-entity policy files. */
  policies: './policies',
  /** Where `serve` listens. */
  port: 8080,
  /** Where the demo listens: loopback, since it prints a working password. */
  demoHost: '127.0.0.1',
  /** How long the backend may stay silent, in ms. */
  timeout: 30000,
  /** Time allowed to receive a request's headers, in ms (docs/checks.md, refusals below HTTP). */
  headersTimeout: 10000,
  /** Time allowed to receive a whole request, in ms. */
  requestTimeout: 30000,
  /** How often those two timeouts are checked, in ms (node's own 30 s is too coarse for a 10 s limit). */
  timeoutCheckInterval: 1000,
  /** Largest request head, in bytes. */
  maxHeaderSize: 16384,
  /** How long an idle client connection is kept open, in ms. */
  keepAliveTimeout: 5000,
  /** Most connections open to the backend at once. */
  maxSockets: 256,
  /**
   * How long an idle connection to the backend is kept, in ms: under node's
   * 5 s server default, so that a payment is never written to a socket the
   * backend is closing at that moment (docs/backend-faults.md).
   */
  backendIdleTimeout: 4000,
  /** Largest backend 5xx body read to see whether it is in the error format. */
  errorBodyLimit: 65536,
  /** How long a drain waits for the requests in flight, in ms. */
  graceMs: 10000,
})

/** The media types of the v6 API for a vendor. */
export interface MediaTypes {
  /** `application/vnd.<vendor>.payments-v6+json` */
  readonly request: string
  /** `application/vnd.<vendor>.payments-v6.hal+json` */
  readonly response: string
}

export function mediaTypes(vendor: string): MediaTypes {
  return {
    request: `application/vnd.${vendor}.payments-v6+json`,
    response: `application/vnd.${vendor}.payments-v6.hal+json`,
  }
}
