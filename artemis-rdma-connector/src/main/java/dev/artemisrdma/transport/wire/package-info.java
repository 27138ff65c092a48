/**
 * Bit layouts, each in one class with its offsets as constants and no allocation per frame: the frame header
 * ({@link dev.artemisrdma.transport.wire.FrameHeader}), the header carried in a SEND's immediate data
 * ({@link dev.artemisrdma.transport.wire.ImmediateHeader}), several small frames in one SEND
 * ({@link dev.artemisrdma.transport.wire.PackedFrames}), the connection handshake
 * ({@link dev.artemisrdma.transport.wire.Handshake}), and, local rather than on the wire, the layout of a work
 * request id that brings a completion back to its channel and slot
 * ({@link dev.artemisrdma.transport.wire.WorkRequestIds}).
 *
 * <p>Why here: encoding and decoding are pure functions of bytes and the configured bounds, so they import only
 * {@code transport.config} and the fabric's exception; everything that sends or receives uses them. Stateless,
 * any thread.
 */
package dev.artemisrdma.transport.wire;
