import { reject, type Rejection } from '../errors.js'
import { OPERATION_PATHS, OPERATIONS, type Operation } from '../schema/payment.js'

const METHOD_NOT_ALLOWED = reject('methodIsNotAllowed', { headers: { Allow: 'POST' } })

/**
 * A path as a lenient backend router may read it, so that no other spelling
 * of an operation's path slips past the checks as "not ours": percent-escapes
 * decoded, a backslash taken as `/`, path parameters (`;jsessionid=...`, RFC 3986
 * 3.3, which servlet containers strip) dropped, empty and `.` segments
 * dropped, `..` applied (RFC 3986 5.2.4), a trailing slash ignored, letters
 * compared without case (docs/checks.md, routes).
 */
export function canonicalPath(path: string): string {
  let decoded = path
  try {
    decoded = decodeURIComponent(path)
  } catch {
    // A malformed escape is compared as it was sent.
  }
  const segments: string[] = []
  for (const part of decoded.replaceAll('\\', '/').split('/')) {
    const parameters = part.indexOf(';')
    const segment = parameters === -1 ? part : part.slice(0, parameters)
    if (segment === '..') segments.pop()
    else if (segment !== '' && segment !== '.') segments.push(segment.toLowerCase())
  }
  return `/${segments.join('/')}`
}

/**
 * Which operation a path addresses, whatever the method: the operation for one
 * of the two paths or another spelling of one (canonicalPath), undefined for
 * any other path (forwarded untouched). The query string does not take part.
 * The exact path is looked up first, so a payment pays nothing for the other
 * spellings.
 */
export function buildRouter(basePath: string): (url: string | undefined) => Operation | undefined {
  const routes = new Map<string, Operation>()
  const spellings = new Map<string, Operation>()
  for (const operation of OPERATIONS) {
    const path = basePath + OPERATION_PATHS[operation]
    routes.set(path, operation)
    spellings.set(canonicalPath(path), operation)
  }
  return (url = '/') => {
    const query = url.indexOf('?')
    const path = query === -1 ? url : url.slice(0, query)
    return routes.get(path) ?? spellings.get(canonicalPath(path))
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
