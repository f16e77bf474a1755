import autocannon, { type Result } from 'autocannon'
import { AUTH } from './gateway.js'
import { ACCEPT, CONTENT_TYPE, SALE_PATH, saleBody } from './payments.js'

/** A bounded autocannon run of valid sales: `duration` seconds, few connections. */
export function loadSales(url: string, duration: number, connections = 4): Promise<Result> {
  const headers = { authorization: AUTH, 'content-type': CONTENT_TYPE, accept: ACCEPT }
  return autocannon({ url, connections, duration, timeout: 5, requests: [{ method: 'POST', path: SALE_PATH, headers, body: JSON.stringify(saleBody()) }] })
}

/** How many answers had each status, e.g. `{ 201: 900, 503: 12 }`. */
export function statusCounts(result: Result): Record<string, number> {
  return Object.fromEntries(Object.entries(result.statusCodeStats).map(([status, { count }]) => [status, count]))
}

export function waitFor(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Polls until the predicate holds, at most `ms`; the caller asserts the outcome. */
export async function until(predicate: () => boolean | Promise<boolean>, ms = 5000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await waitFor(10)) if (await predicate()) return true
  return predicate()
}
