/**
 * TLS over a channel: {@link dev.artemisrdma.transport.tls.TlsChannel} runs the JDK's {@code SSLEngine} over an
 * {@link dev.artemisrdma.transport.api.RdmaChannel}'s frames, one application frame to one frame of whole records
 * (the layout is in {@code docs/protocol.md}, section TLS). It uses the API only: any channel can carry it.
 */
package dev.artemisrdma.transport.tls;
