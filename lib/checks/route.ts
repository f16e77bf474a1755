import { reject, type Rejection } from '../errors.js'
import { foldCase } from '../fold-case.js'
import { OPERATION_PATHS, OPERATIONS, type Operation } from '../schema/payment.js'

const METHOD_NOT_ALLOWED = reject('methodIsNotAllowed', { headers: { Allow: 'POST' } })
/** A request target that is neither origin form nor absolute form of an http(s) URI (RFC 9112 3.2), or one with a fragment. */
const MALFORMED_TARGET = reject('requestIsMalformed')
/**
 * An HTTP/1.1 request with no `Host`, or an empty one (RFC 9112 3.2: a server must answer 400). The proxy asks, as
 * node's own check of it answers a bare 400 with no body.
 */
export const MISSING_HOST: Rejection = Object.freeze(
  reject('requestIsMalformed', { message: 'The HTTP request is malformed: HTTP/1.1 requires a Host header.' }),
)
/** An absolute-form target's scheme (RFC 9112 3.2.2): the only two a gateway in front of an HTTP backend serves. */
const HTTP_SCHEME = /^https?:\/\//i
/**
 * An authority with no userinfo (RFC 9110 4.2.4): an IP literal or a registered name (RFC 3986 3.2.2), never empty, as
 * an `http` URI's host may not be (RFC 9110 4.2.1), then an optional port of digits (3.2.3).
 */
const AUTHORITY = /^(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+)(?::[0-9]*)?$/
/** A run of percent-escapes, decoded together: the bytes of one UTF-8 character may be spread over several. */
const ESCAPES = /(?:%[\da-f]{2})+/gi
/**
 * A request target that cannot be read one way: some reader takes it for the sale and another for the
 * recurring authorization, or it names an operation in a spelling that readers read apart.
 */
const UNREADABLE_TARGET = MALFORMED_TARGET
/**
 * What may take segments off the front of a path, once decoded: a dot segment (`..`, `.`, with a
 * parameter as Tomcat reads `..;x`), resolved by some readers before they decode or cut the path and by
 * others after, and a leading `//`, an authority to a URL parser.
 */
const LOSES_FRONT = /^[/\\]{2}|[/\\]\.{1,2}(?:;[^/\\]*)?(?:$|[/\\])/
/** The longest path, in bytes, that names an operation and may lose segments off its front, read every way rather than refused. */
const READ_EVERY_WAY_UP_TO = 512
/** What WHATWG URL drops wherever it stands in a URL (URL Standard, basic URL parser): a tab or a newline, once decoded. */
const TAB_OR_NEWLINE = /[\t\n\r]/g
/** A dot segment, its dots escaped or not, between slashes or backslashes (every path read here starts with one). */
const DOT_SEGMENT = /[/\\](?:\.|%2e){1,2}(?=[/\\]|$)/i
/** Where a decoded path ends for some backend: a NUL (C strings), or an escaped `?` or `#` decoded before the path was split off. */
const PATH_END = /[\0?#]/
/** What may make a path's front read otherwise than as plain segments: an escape, a dot, a backslash or a parameter. */
const UNPLAIN = /[%.\\;]/
/** The spellings of a dot segment, 1 for `.` and 2 for `..`, an escaped dot (`%2e`) included, as WHATWG URL reads it. */
const DOTS = new Map<string, number>()
for (const one of ['.', '%2e', '%2E']) {
  DOTS.set(one, 1)
  for (const two of ['.', '%2e', '%2E']) DOTS.set(one + two, 2)
}
const SLASH = 0x2f
const BACKSLASH = 0x5c

/**
 * What the router made of a request target: the operation that any plausible
 * reader takes it for, which the checks route on, and the target the
 * forwarders send (docs/checks.md, routes).
 */
export interface RequestTarget {
  readonly ok: true
  /** The operation the path names (another spelling of its path included), or undefined for a path not ours. */
  readonly operation: Operation | undefined
  /**
   * Path and query in origin form (RFC 9112 3.2.1): what the backend is sent. The request's own target,
   * unless it came in absolute form or its path starts with more than one slash (forwardedPath).
   */
  readonly path: string
  /** The authority of an absolute-form target, which a server uses instead of `Host` (RFC 9112 3.2.2); undefined in origin form. */
  readonly host: string | undefined
}

/** An escaped run decoded as UTF-8; bytes that are not UTF-8 become U+FFFD, as a lenient decoder reads them. */
function unescapeRun(run: string): string {
  return Buffer.from(run.replaceAll('%', ''), 'hex').toString('utf8')
}

/**
 * A path decoded once more, as a hop that decodes it before handing it on
 * does: each run of escapes, and what WHATWG URL drops wherever it stands
 * (a tab or a newline, which only an escape can bring into a target).
 */
function decodeOnce(path: string): string {
  return path.includes('%') ? path.replace(ESCAPES, unescapeRun).replace(TAB_OR_NEWLINE, '') : path
}

/** Percent-escapes decoded twice, for a backend behind another hop that decodes. */
function decodeTwice(path: string): string {
  return decodeOnce(decodeOnce(path))
}

/** A segment without the C0 controls and spaces it ends with, which WHATWG URL strips from a URL's end and Windows from a name's. */
function trimmed(segment: string): string {
  let end = segment.length
  // Before the first character, charCodeAt is NaN, which ends the loop.
  while (segment.charCodeAt(end - 1) <= 0x20) end--
  return segment.slice(0, end)
}

/**
 * A path as a lenient backend router may read it, so that no other spelling
 * of an operation's path slips past the checks as "not ours": percent-escapes
 * decoded (twice, for a backend behind another hop that decodes; a tab or
 * newline so decoded dropped, as WHATWG URL drops them), cut at a
 * decoded NUL, `?` or `#` (operationOf reads it whole as well: a router that matches segments before
 * decoding them, as Express's `/:tenant/...`, keeps them in their segment), letters folded (foldCase), a backslash taken as
 * `/`, path parameters (`;jsessionid=...`, RFC 3986 3.3, which servlet
 * containers strip) dropped, empty and `.` segments dropped, `..` applied
 * (RFC 3986 5.2.4), a trailing slash ignored, and a segment cut at its first
 * `.` (Spring's suffix patterns, Windows' trailing dots) and its trailing
 * spaces and controls dropped (docs/checks.md, routes).
 * Reading more paths as an operation's than a backend would costs nothing:
 * such a request is checked.
 */
export function canonicalPath(path: string): string {
  const decoded = decodeTwice(path)
  const end = decoded.search(PATH_END)
  return readSegments(end === -1 ? decoded : decoded.slice(0, end))
}

/** A decoded path's segments read as canonicalPath reads them, from the folding on. */
function readSegments(decoded: string): string {
  const segments: string[] = []
  for (const part of foldCase(decoded).replaceAll('\\', '/').split('/')) {
    const parameters = part.indexOf(';')
    const segment = trimmed(parameters === -1 ? part : part.slice(0, parameters))
    if (segment === '..') segments.pop()
    else {
      const suffix = segment.indexOf('.')
      const name = suffix === -1 ? segment : trimmed(segment.slice(0, suffix))
      if (name !== '') segments.push(name)
    }
  }
  return `/${segments.join('/')}`
}

/**
 * The one parse of a request target (RFC 9112 3.2): origin form as it
 * came; absolute form of an `http` or `https` URI as its path and query in
 * origin form (`/` for an empty path) and its authority. Anything else is
 * refused: another scheme, userinfo (RFC 9110 4.2.4), an empty host
 * (`http://:81/`) or any other authority RFC 3986 does not write, the
 * asterisk form, and a fragment, which no form admits but node's parser
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
  // Also one node's `URL` reads, as a backend on node reads `Host`: it refuses some RFC 3986 names (`a127.0.0.1`).
  if (!AUTHORITY.test(host) || !URL.canParse(`http://${host}`)) return MALFORMED_TARGET
  const tail = rest.slice(end)
  return { path: tail.startsWith('/') ? tail : `/${tail}`, host }
}

function isForwardSlash(code: number): boolean {
  return code === SLASH
}

function isSlash(code: number): boolean {
  return code === SLASH || code === BACKSLASH
}

/** How many slashes and backslashes a path starts with. */
function leadingSlashes(path: string): number {
  let run = 0
  while (isSlash(path.charCodeAt(run))) run++
  return run
}

/**
 * The target the backend is sent: the one given, but a path that starts with
 * two or more slashes or backslashes starts with one slash. Readers disagree
 * on such a path: `new URL(target, base)` (node's documented way), Python's
 * `urlsplit` or Java's `URI` read its first segment as an authority (RFC 3986
 * 4.2, a network-path reference), a router as a path. With one slash, every
 * one of them reads a path, and reads the same one.
 */
export function forwardedPath(path: string): string {
  const run = leadingSlashes(path)
  return run < 2 ? path : `/${path.slice(run)}`
}

/**
 * RFC 3986 5.2.4 remove_dot_segments on a path not yet decoded, as a URL
 * parser applies it before any router decodes the path: segments split at
 * `/`, and with `backslash` at `\` too (WHATWG URL, for http and https).
 */
function withoutDotSegments(path: string, backslash: boolean): string {
  if (!DOT_SEGMENT.test(path)) return backslash ? path.replaceAll('\\', '/') : path
  const out: string[] = []
  const parts = backslash ? path.replaceAll('\\', '/').split('/') : path.split('/')
  // parts[0], before the first slash, is empty: every path read here starts with one.
  for (let at = 1; at < parts.length; at++) {
    const segment = parts[at] as string
    const dots = DOTS.get(segment) ?? 0
    // A dot segment last leaves the RFC's output ending in a slash: canonicalPath reads it without.
    if (dots === 2) out.pop()
    if (dots === 0) out.push(segment)
  }
  return `/${out.join('/')}`
}

/**
 * What follows the authority of a path that starts with two slashes, as a
 * reader that takes it for a network-path reference (RFC 3986 4.2) reads it:
 * WHATWG URL (`backslash`) skips every leading slash and backslash and ends
 * the host at the next one; RFC 3986 (node's legacy `url.parse`, Python,
 * Java) ends the authority at the next `/`, after as many empty ones as the
 * slashes make; empty when nothing follows the authority. Undefined for a path
 * that does not start so.
 */
function afterAuthority(path: string, backslash: boolean): string | undefined {
  const separates = backslash ? isSlash : isForwardSlash
  let start = 0
  while (separates(path.charCodeAt(start))) start++
  if (start < 2) return undefined
  let end = start
  while (end < path.length && !separates(path.charCodeAt(end))) end++
  return path.slice(end)
}

/**
 * How URL parsers read a path before a router compares it (each may be a
 * hop's, which hands its reading on, or the backend's own): `new URL(target,
 * base)` (node's documented way: an authority after a leading `//` or `/\`, a
 * backslash a slash, dot segments removed, escaped dots included), `new
 * URL(base + target)` (dot segments alone), RFC 3986 resolution (an authority
 * after `//`, ended by `/` alone; dot segments), and node's legacy `url.parse`
 * with `slashesDenoteHost` (backslashes made slashes, then an authority).
 */
const PARSERS: readonly ((path: string) => string)[] = [
  (path) => withoutDotSegments(afterAuthority(path, true) ?? path, true),
  (path) => withoutDotSegments(path, true),
  (path) => withoutDotSegments(afterAuthority(path, false) ?? path, false),
  (path) => afterAuthority(path.replaceAll('\\', '/'), false) ?? path,
]

/**
 * Every path that some reader of a request's path may take it for, each to
 * be read leniently after (canonicalPath): the path as it came, and after one
 * or two hops that percent-decode it before handing it on
 * (`/%2F%2Fevil/payments/...`); each of those as read by one of PARSERS, or
 * by one and then another (a hop that resolves `/a/..//evil/payments/...`
 * before a backend that takes `evil` for an authority). A parser removes dot
 * segments before any router decodes and cuts the path: `/x%00/../payments/...`
 * is the sale to `new URL`, and `/x` to a router that cuts at the NUL first.
 */
function readingsOf(paths: Iterable<string>): Set<string> {
  const readings = new Set<string>()
  for (const path of paths) {
    let text = path
    for (let hop = 0; hop < 3; hop++) {
      if (hop > 0) {
        if (!text.includes('%')) break
        text = decodeOnce(text)
      }
      readings.add(text)
      for (const parse of PARSERS) {
        const once = parse(text)
        if (readings.has(once)) continue
        readings.add(once)
        for (const again of PARSERS) readings.add(again(once))
      }
    }
  }
  return readings
}

/**
 * Which operation a request target addresses, whatever the method, read
 * once by parseTarget: the operation that some plausible reader of its path
 * takes it for (readingsOf, each read by canonicalPath), undefined for a path
 * that no reader takes for one (forwarded untouched), and a refusal for a
 * target parseTarget refuses, that one reader takes for the sale and another
 * for the recurring authorization, or that cannot be read every way
 * (operationOf). The query string does not take part. The exact path is looked up first, so a payment pays nothing for the
 * other readings.
 *
 * `mounted` reads the target as a middleware must, not knowing what its
 * application mounts below it: a path whose reading ends with an
 * operation's path is that operation, whatever comes before it (a mount
 * point, a prefix, a path parameter) (docs/middleware-reference.md, mounts). The
 * proxy has no such rule: `/v5/...` and an application's own
 * `/admin/.../payments/...` are not `{base}/payments/...`.
 */
export function buildRouter(
  basePath: string,
): (url: string | undefined, mounted?: boolean) => RequestTarget | Rejection {
  const routes = new Map<string, Operation>()
  const spellings = new Map<string, Operation>()
  const tails = new Map<string, Operation>()
  let tailSegments = 0
  for (const operation of OPERATIONS) {
    const path = OPERATION_PATHS[operation]
    routes.set(basePath + path, operation)
    spellings.set(canonicalPath(basePath + path), operation)
    const tail = canonicalPath(path)
    tails.set(tail, operation)
    tailSegments = Math.max(tailSegments, tail.split('/').length - 1)
  }

  // An operation's last segment standing whole, up to where some reader ends or cuts it.
  const lasts = OPERATIONS.map((operation) =>
    foldCase(OPERATION_PATHS[operation].slice(OPERATION_PATHS[operation].lastIndexOf('/') + 1)),
  )
  const names = new RegExp(`(?:^|[/\\\\])(?:${lasts.join('|')})(?:$|[/\\\\.;?#\\0]|[\\0- ]+$)`)

  /** The operation whose path a canonical path ends with (its leading `/` stops the search at 0). */
  function tailOf(canonical: string): Operation | undefined {
    let at = canonical.length
    for (let segment = 0; segment < tailSegments; segment++) at = canonical.lastIndexOf('/', at - 1)
    return tails.get(canonical.slice(at))
  }

  /** A path ending in an operation's own path after plain segments (no escapes, dots, backslashes or parameters): no reader takes it for another. */
  function plainTail(path: string): Operation | undefined {
    for (const operation of OPERATIONS) {
      // No operation's path holds one of UNPLAIN: finding none in the whole path finds none in front of it.
      if (path.endsWith(OPERATION_PATHS[operation])) return UNPLAIN.test(path) ? undefined : operation
    }
    return undefined
  }

  /**
   * `path` as sent, and `forwarded`, the one the backend reads (forwardedPath), the same unless it
   * started with several slashes. A path in which no operation's last segment stands whole once
   * decoded and folded is nobody's operation; one whose readers could only differ in what
   * canonicalPath reads leniently (escapes, case, a backslash, parameters, repeated slashes, a
   * suffix) is read by it alone; one in which a reader may take segments off the front (LOSES_FRONT)
   * by every reading, and refused when none of them takes it for an operation, since a reader beyond
   * them might, or when it is too long to read every way.
   */
  function operationOf(path: string, forwarded: string, mounted: boolean): Operation | Rejection | undefined {
    const exact = routes.get(path) ?? (mounted ? plainTail(path) : undefined)
    if (exact !== undefined) return exact
    const decoded = decodeTwice(path)
    if (!names.test(foldCase(decoded))) return undefined
    const apart = LOSES_FRONT.test(decoded)
    // Reading it every way costs in proportion to its length; a payment's path is a few dozen bytes.
    if (apart && path.length > READ_EVERY_WAY_UP_TO) return UNREADABLE_TARGET
    const paths = new Set([path, forwarded])
    let found: Operation | undefined
    for (const reading of apart ? readingsOf(paths) : paths) {
      const whole = decodeTwice(reading)
      const end = whole.search(PATH_END)
      // A router that matches segments before decoding them (Express's `/:tenant/...`) keeps a decoded `?`, `#` or NUL in its segment.
      for (const read of end === -1 ? [whole] : [whole.slice(0, end), whole]) {
        const canonical = readSegments(read)
        const operation = spellings.get(canonical) ?? (mounted ? tailOf(canonical) : undefined)
        if (operation === undefined) continue
        if (found !== undefined && found !== operation) return UNREADABLE_TARGET
        found = operation
      }
    }
    return found === undefined && apart ? UNREADABLE_TARGET : found
  }

  return (url = '/', mounted = false) => {
    const target = parseTarget(url)
    if ('ok' in target) return target
    const forwarded = forwardedPath(target.path)
    const query = target.path.indexOf('?')
    const path = query === -1 ? target.path : target.path.slice(0, query)
    const operation = operationOf(path, forwarded === target.path ? path : forwardedPath(path), mounted)
    if (typeof operation === 'object') return operation
    return { ok: true, operation, path: forwarded, host: target.host }
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
