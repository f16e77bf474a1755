/** A TLS client's view of a gateway serving HTTPS: which certificate a new connection gets, and one sale over it. */
import { X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { request } from 'node:https'
import { connect } from 'node:tls'
import type { PemFiles } from './certificates.js'
import { saleBody } from './fixtures.js'
import { paymentHeaders } from './http.js'

/** The serial number of the certificate in `files`. */
export const serialOf = (files: PemFiles): string => new X509Certificate(readFileSync(files.cert)).serialNumber

/** The serial number of the certificate a new TLS connection to `port` is given, verified against `ca`. */
export function servedSerial(port: number, ca: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      resolve(socket.getPeerCertificate().serialNumber)
      socket.end()
    })
    socket.on('error', reject)
  })
}

/** One sale over HTTPS on a new connection, with this `transactionReference`: its status. */
export function httpsSale(port: number, ca: Buffer, transactionReference: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      `https://localhost:${port}/payments/sales/migrateCardOnFile`,
      { method: 'POST', headers: paymentHeaders(), ca, agent: false },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode as number))
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify(saleBody({ transactionReference })))
  })
}
