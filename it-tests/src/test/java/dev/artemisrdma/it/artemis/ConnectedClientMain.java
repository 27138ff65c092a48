package dev.artemisrdma.it.artemis;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import jakarta.jms.Connection;
import jakarta.jms.Session;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

/**
 * A JMS client in a process of its own, connected over RDMA with a consumer open, so a test can SIGKILL it. Prints
 * {@value #READY} once connected. Arguments: the {@code rdma://} URL and a queue name.
 */
public final class ConnectedClientMain {

    public static final String READY = "CLIENT CONNECTED";

    private ConnectedClientMain() {
    }

    public static void main(String[] args) throws Exception {
        ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(args[0]);
        Connection connection = cf.createConnection();
        connection.start();
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        session.createConsumer(session.createQueue(args[1]));
        System.out.println(READY);
        System.out.flush();
        Thread.currentThread().join();
    }
}
