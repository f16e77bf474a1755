import { reject, type Rejection } from '../errors.js'
import { OPERATION_PATHS, OPERATIONS, type Operation } from '../schema/payment.js'

const METHOD_NOT_ALLOWED = reject('methodIsNotAllowed', { headers: { Allow: 'POST' } })

/**
 * Which operation a request addresses: the operation for a POST to one of the
 * two paths, a 405 for another method there, undefined for any other path
 * (forwarded untouched). The query string does not take part.
 */
export function buildRouter(basePath: string): (method: string | undefined, url: string | undefined) => Operation | Rejection | undefined {
  const routes = new Map<string, Operation>()
  for (const operation of OPERATIONS) routes.set(basePath + OPERATION_PATHS[operation], operation)
  return (method, url = '/') => {
    const query = url.indexOf('?')
    const operation = routes.get(query === -1 ? url : url.slice(0, query))
    if (operation === undefined) return undefined
    return method === 'POST' ? operation : METHOD_NOT_ALLOWED
  }
}

/** A base path as given on the command line: leading slash, no trailing slash, `/` meaning none. */
export function normalizeBasePath(path: string): string {
  const trimmed = path.replace(/\/+$/, '')
  return trimmed === '' || trimmed.startsWith('/') ? trimmed : `/${trimmed}`
}
