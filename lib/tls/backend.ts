import type { AgentOptions } from 'node:http'
import { Agent, type RequestOptions } from 'node:https'
import { isIP } from 'node:net'
import type { Duplex } from 'node:stream'
import type { SecureContext } from 'node:tls'
import type { buildConnector as UndiciConnector } from 'undici'
import { buildConnector } from '../proxy/undici.js'
import type { TlsSource } from './files.js'
import { clientContext } from './pem.js'

/** What a TLS connection to the backend is made with: the CA bundle and client certificate, built once per version. */
export interface BackendTls {
  readonly context: SecureContext
}

/** TLS to an `https:` target: the watched CA bundle and client certificate (else system roots), the name to check. */
export interface TargetTls {
  readonly files?: TlsSource<BackendTls> | undefined
  /** The name the backend's certificate must carry; default the target's host. */
  readonly servername?: string | undefined
}

export interface BackendConnections {
  /** The undici pool's `connect`: each new connection with the context in force, checked for the configured name. */
  readonly connect: UndiciConnector.connector
  /**
   * The `servername` every payment's dispatch carries: without one, undici takes it from the request's
   * `Host` (a name the client chose) and tears down a pooled connection whenever it changes. The same
   * on every dispatch; `connect` checks the configured name whatever it says.
   */
  readonly dispatchName: string
  /** The agent behind http-proxy-3: each new connection with the context in force. */
  agent(options: AgentOptions): Agent
}

/**
 * The name the backend's certificate must carry: `--target-servername`, or the
 * target's host. An address is checked against the certificate's IP names and
 * sent without SNI (RFC 6066 3 allows host names only): `''` tells node's agent
 * not to take one from the client's `Host`.
 */
export function serverName(target: URL, servername: string | undefined): string {
  const host = hostOf(target)
  return servername ?? (isIP(host) === 0 ? host : '')
}

/** The target's host as a name or an address, an IPv6 address without its brackets. */
function hostOf(target: URL): string {
  return target.hostname.replace(/^\[(.*)\]$/, '$1')
}

class BackendAgent extends Agent {
  readonly source: TlsSource<BackendTls>
  constructor(options: AgentOptions & { servername: string }, source: TlsSource<BackendTls>) {
    super(options)
    this.source = source
  }

  // Documented as the agent's hook for making a connection (node's http.md, agent.createConnection).
  override createConnection(
    options: RequestOptions,
    callback?: (error: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    // `secureContext` is a tls.connect option, which https.Agent passes on whole.
    const secure = { ...options, secureContext: this.source.current.context, rejectUnauthorized: true }
    return super.createConnection(secure as RequestOptions, callback)
  }
}

/**
 * TLS to an `https:` target for both engines, always verified (there is no
 * option to turn it off, docs/deployment.md): the pool's connector and the
 * agent read the context in force when they open a connection, so a reloaded
 * CA or client certificate applies to new connections, and open ones keep theirs.
 */
export function backendConnections(
  target: URL,
  tls: TargetTls | undefined,
  timeout: number,
): BackendConnections | undefined {
  if (target.protocol !== 'https:') return undefined
  // Without files: the system's roots, no client certificate.
  const source = tls?.files ?? { current: { context: clientContext(undefined, undefined) }, onChange: () => undefined }
  const servername = serverName(target, tls?.servername)
  const options = (context: SecureContext) => ({
    secureContext: context,
    servername: servername || undefined,
    rejectUnauthorized: true,
    timeout,
  })
  let connector = buildConnector(options(source.current.context))
  source.onChange((next) => {
    connector = buildConnector(options(next.context))
  })
  return {
    // The name asked for by the dispatch is left out: the connector's own (none for an address) decides.
    connect: (connectOptions, callback) => connector({ ...connectOptions, servername: undefined }, callback),
    dispatchName: servername || hostOf(target),
    agent: (agentOptions) => new BackendAgent({ ...agentOptions, servername }, source),
  }
}
