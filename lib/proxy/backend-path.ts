/**
 * The backend path of a request forwarded to `target`: the target's own path
 * in front of the request's (one slash between them), and the target's query,
 * if any, before the request's, as http-proxy joins them for the other paths.
 */
export function backendPaths(target: URL): (url: string) => string {
  const prefix = target.pathname.endsWith('/') ? target.pathname.slice(0, -1) : target.pathname
  const query = target.search.slice(1)
  if (query === '') return (url) => prefix + url
  return (url) => {
    const at = url.indexOf('?')
    if (at === -1) return `${prefix}${url}?${query}`
    const own = url.slice(at + 1)
    return `${prefix}${url.slice(0, at)}?${own === '' ? query : `${query}&${own}`}`
  }
}
