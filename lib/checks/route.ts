import { reject, type Rejection } from '../errors.js'
import { foldCase } from '../fold-case.js'
import { OPERATION_PATHS, OPERATIONS, type Operation } from '../schema/payment.js'

const METHOD_NOT_ALLOWED = reject('methodIsNotAllowed', { headers: { Allow: 'POST' } })
/** A request target that is neither origin form nor absolute form of an http(s) URI (RFC 9112 3.2), or one with a fragment. */
const MALFORMED_TARGET = reject('requestIsMalformed')
/** An absolute-form target's scheme (RFC 9112 3.2.2): the only two a gateway in front of an HTTP backend serves. */
const HTTP_SCHEME = /^https?:\/\//i
/** A run of percent-escapes, decoded together: the bytes of one UTF-8 character may be spread over several. */
const ESCAPES = /(?:%[\da-f]{2})+/gi

/**
 * What the router made of a request target: the one reading of it that the
 * checks route on and the forwarders send on (docs/checks.md, routes).
 */
export interface RequestTarget {
  readonly ok: true
  /** The operation the path names (another spelling of its path included), or undefined for a path not ours. */
  readonly operation: Operation | undefined
  /** Path and query in origin form (RFC 9112 3.2.1): what the backend is sent. The request's own target unless it came in absolute form. */
  readonly path: string
  /** The authority of an absolute-form target, which a server uses instead of `Host` (RFC 9112 3.2.2); undefined in origin form. */
  readonly host: string | undefined
}

/** An escaped run decoded as UTF-8; bytes that are not UTF-8 become U+FFFD, as a lenient decoder reads them. */
function unescapeRun(run: string): string {
  return Buffer.from(run.replaceAll('%', ''), 'hex').toString('utf8')
}

/** Where a decoded path ends for some backend: a NUL (C strings), or an escaped `?` or `#` decoded before the path was split off. */
function pathEnd(text: string): number {
  let end = text.length
  for (const stop of ['\0', '?', '#']) {
    const at = text.indexOf(stop)
    if (at !== -1 && at < end) end = at
  }
  return end
}

/**
 * A path as a lenient backend router may read it, so that no other spelling
 * of an operation's path slips past the checks as "not ours": percent-escapes
 * decoded (twice, for a backend behind another hop that decodes), cut at a
 * decoded NUL, `?` or `#`, letters folded (foldCase), a backslash taken as
 * `/`, path parameters (`;jsessionid=...`, RFC 3986 3.3, which servlet
 * containers strip) dropped, empty and `.` segments dropped, `..` applied
 * (RFC 3986 5.2.4), a trailing slash ignored, and a segment cut at its first
 * `.` (Spring's suffix patterns, Windows' trailing dots) (docs/checks.md, routes).
 * Reading more paths as an operation's than a backend would costs nothing:
 * such a request is checked.
 */
export function canonicalPath(path: string): string {
  const decoded = path.replace(ESCAPES, unescapeRun).replace(ESCAPES, unescapeRun)
  const folded = foldCase(decoded.slice(0, pathEnd(decoded)))
  const segments: string[] = []
  for (const part of folded.replaceAll('\\', '/').split('/')) {
    const parameters = part.indexOf(';')
    const segment = parameters === -1 ? part : part.slice(0, parameters)
    if (segment === '..') segments.pop()
    else {
      const suffix = segment.indexOf('.')
      const name = suffix === -1 ? segment : segment.slice(0, suffix)
      if (name !== '') segments.push(name)
    }
  }
  return `/${segments.join('/')}`
}

/**
 * The one parse of a request target (RFC 9112 3.2): origin form as it
 * came; absolute form of an `http` or `https` URI as its path and query in
 * origin form (`/` for an empty path) and its authority. Anything else is
 * refused: another scheme, userinfo (RFC 9110 4.2.4), an empty authority,
 * the asterisk form, and a fragment, which no form admits but node's parser
 * lets through, and which engines and backend routers would each drop or
 * keep in their own way.
 */
export function parseTarget(url: string): { path: string; host: string | undefined } | Rejection {
  if (url.includes('#')) return MALFORMED_TARGET
  if (url.startsWith('/')) return { path: url, host: undefined }
  const scheme = HTTP_SCHEME.exec(url)
  if (scheme === null) return MALFORMED_TARGET
  const rest = url.slice(scheme[0].length)
  const slash = rest.indexOf('/')
  const query = rest.indexOf('?')
  const end = slash === -1 ? (query === -1 ? rest.length : query) : query === -1 ? slash : Math.min(slash, query)
  const host = rest.slice(0, end)
  if (host === '' || host.includes('@')) return MALFORMED_TARGET
  const tail = rest.slice(end)
  return { path: tail.startsWith('/') ? tail : `/${tail}`, host }
}

/**
 * Which operation a request target addresses, whatever the method, read
 * once by parseTarget: the operation for one of the two paths or another
 * spelling of one (canonicalPath), undefined for any other path (forwarded
 * untouched); a target parseTarget refuses, refused. The query string does
 * not take part. The exact path is looked up first, so a payment pays
 * nothing for the other spellings. `mount` is the path a middleware is
 * mounted under: a target below it is also read with `mount` taken off
 * (docs/middleware.md, base path).
 */
export function buildRouter(basePath: string): (url: string | undefined, mount?: string) => RequestTarget | Rejection {
  const routes = new Map<string, Operation>()
  const spellings = new Map<string, Operation>()
  for (const operation of OPERATIONS) {
    const path = basePath + OPERATION_PATHS[operation]
    routes.set(path, operation)
    spellings.set(canonicalPath(path), operation)
  }
  function operationOf(path: string, mount: string): Operation | undefined {
    const exact = routes.get(path)
    if (exact !== undefined) return exact
    const canonical = canonicalPath(path)
    const spelt = spellings.get(canonical)
    if (spelt !== undefined || mount === '') return spelt
    const under = canonicalPath(mount)
    return canonical.startsWith(`${under}/`) ? spellings.get(canonical.slice(under.length)) : undefined
  }
  return (url = '/', mount = '') => {
    const target = parseTarget(url)
    if ('ok' in target) return target
    const query = target.path.indexOf('?')
    const path = query === -1 ? target.path : target.path.slice(0, query)
    return { ok: true, operation: operationOf(path, mount), path: target.path, host: target.host }
  }
}

/** The route of a request to `operation`'s path: the operation for a POST, a 405 for another method; undefined for a path not ours. */
export function routeFor(
  method: string | undefined,
  operation: Operation | undefined,
): Operation | Rejection | undefined {
  if (operation === undefined) return undefined
  return method === 'POST' ? operation : METHOD_NOT_ALLOWED
}

/** A base path as given on the command line: leading slash, no trailing slash, `/` meaning none. */
export function normalizeBasePath(path: string): string {
  let end = path.length
  while (path[end - 1] === '/') end--
  const trimmed = path.slice(0, end)
  return trimmed === '' || trimmed.startsWith('/') ? trimmed : `/${trimmed}`
}
