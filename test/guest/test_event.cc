// SPDX-License-Identifier: BSD-3-Clause
// Event fd and arm: a process can sleep until its iface has work.
#include "syncmem_test.h"

#include <poll.h>

class syncmem_event_test : public syncmem_test {
protected:
    static const uint8_t AM_ID = 3;

    void SetUp() override {
        syncmem_test::SetUp();
        // the receiver progresses on its own worker, so that progressing the
        // sender does not also drain the receiver
        ASSERT_EQ(UCS_OK, ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                                   &m_rx_async));
        ASSERT_EQ(UCS_OK, uct_worker_create(m_rx_async, UCS_THREAD_MODE_SINGLE,
                                            &m_rx_worker));
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_receiver, {},
                                     {}, m_rx_worker));
        ASSERT_EQ(UCS_OK, open_iface(m_md, "syncmem", m_dev, &m_sender));
        uct_iface_set_am_handler(m_receiver, AM_ID, count_cb, &m_received, 0);
        ASSERT_EQ(UCS_OK, connect(m_sender, m_receiver, &m_ep));
        ASSERT_EQ(UCS_OK, uct_iface_event_fd_get(m_receiver, &m_rx_fd));
        ASSERT_EQ(UCS_OK, uct_iface_event_fd_get(m_sender, &m_tx_fd));
        send_and_receive(); // connected, and both sides quiet
    }

    void TearDown() override {
        for (uct_ep_h ep : m_eps) {
            uct_ep_destroy(ep);
        }
        m_eps.clear();
        uct_iface_close(m_receiver);
        m_ifaces.erase(std::find(m_ifaces.begin(), m_ifaces.end(), m_receiver));
        uct_worker_destroy(m_rx_worker);
        ucs_async_context_destroy(m_rx_async);
        syncmem_test::TearDown();
    }

    static ucs_status_t count_cb(void *arg, void *data, size_t length,
                                 unsigned flags) {
        ++*static_cast<int*>(arg);
        return UCS_OK;
    }

    static bool readable(int fd, int timeout_ms) {
        struct pollfd p = { fd, POLLIN, 0 };
        return poll(&p, 1, timeout_ms) == 1;
    }

    void send() {
        ucs_status_t status;
        wait_bound bound("resources to send an active message");
        while (((status = uct_ep_am_short(m_ep, AM_ID, 0, NULL, 0)) ==
               UCS_ERR_NO_RESOURCE) && bound()) {
            uct_worker_progress(m_worker);
        }
        ASSERT_EQ(UCS_OK, status);
        // one progress of the sender rings its doorbell (TX_DB_BATCH)
        uct_worker_progress(m_worker);
    }

    // the receiver drains until nothing is left and arming succeeds
    void drain_and_arm(uct_iface_h iface, uct_worker_h worker, unsigned ev) {
        ucs_status_t status;
        wait_bound bound("the receiver to drain (uct_iface_event_arm busy)");
        while (((status = uct_iface_event_arm(iface, ev)) == UCS_ERR_BUSY) && bound()) {
            uct_worker_progress(worker);
        }
        ASSERT_EQ(UCS_OK, status);
    }

    void send_and_receive() {
        int before = m_received;
        send();
        wait_bound bound("the message to arrive");
        while ((m_received == before) && bound()) {
            uct_worker_progress(m_worker);
            uct_worker_progress(m_rx_worker);
        }
    }

    ucs_async_context_t *m_rx_async  = nullptr;
    uct_worker_h        m_rx_worker  = nullptr;
    uct_iface_h         m_receiver, m_sender;
    uct_ep_h            m_ep;
    int                 m_rx_fd, m_tx_fd;
    int                 m_received   = 0;
};

TEST_F(syncmem_event_test, caps)
{
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_receiver, &attr));
    EXPECT_TRUE(attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_FD);
    EXPECT_TRUE(attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_RECV);
    EXPECT_TRUE(attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_SEND_COMP);
}

TEST_F(syncmem_event_test, remote_message_wakes_the_receiver)
{
    for (int i = 0; i < 10; ++i) {
        drain_and_arm(m_receiver, m_rx_worker, UCT_EVENT_RECV);
        EXPECT_FALSE(readable(m_rx_fd, 0)) << "armed, yet already readable";

        int before = m_received;
        send();
        ASSERT_TRUE(readable(m_rx_fd, 20000)) << "no wakeup for a message";
        // the event is pending: arming again says busy
        EXPECT_EQ(UCS_ERR_BUSY, uct_iface_event_arm(m_receiver, UCT_EVENT_RECV));
        wait_bound bound("the message to arrive after the wakeup");
        while ((m_received == before) && bound()) {
            uct_worker_progress(m_rx_worker);
            uct_worker_progress(m_worker);
        }
    }
}

// A message that arrived before the arm is not slept through.
TEST_F(syncmem_event_test, arm_is_busy_when_work_is_waiting)
{
    drain_and_arm(m_receiver, m_rx_worker, UCT_EVENT_RECV);
    uct_worker_progress(m_rx_worker); // nothing there: disarms nothing
    int before = m_received;
    send();
    // make sure it landed: the sender's flush completes after the receive
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ucs_status_t status;
    wait_bound bound("resources to flush the endpoint");
    while (((status = uct_ep_flush(m_ep, 0, &comp)) == UCS_ERR_NO_RESOURCE) && bound()) {
        uct_worker_progress(m_worker);
    }
    wait_bound bound2("the flush to complete");
    while (((status == UCS_INPROGRESS) && (comp.count > 0)) && bound2()) {
        uct_worker_progress(m_worker);
    }
    // the first arm's event fired; also a fresh arm must not sleep on it
    EXPECT_EQ(UCS_ERR_BUSY, uct_iface_event_arm(m_receiver, UCT_EVENT_RECV));
    EXPECT_EQ(UCS_ERR_BUSY, uct_iface_event_arm(m_receiver, UCT_EVENT_RECV));
    wait_bound bound3("the message to arrive at the receiver");
    while ((m_received == before) && bound3()) {
        uct_worker_progress(m_rx_worker);
    }
    drain_and_arm(m_receiver, m_rx_worker, UCT_EVENT_RECV);
}

TEST_F(syncmem_event_test, own_send_completion_wakes_the_sender)
{
    std::vector<uint64_t> src(1024, 7), dst(1024, 0);
    uct_mem_h smemh, dmemh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, src.data(), 8192,
                                     UCT_MD_MEM_ACCESS_ALL, &smemh));
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, dst.data(), 8192,
                                     UCT_MD_MEM_ACCESS_ALL, &dmemh));
    std::vector<uint8_t> packed(64);
    uct_md_mkey_pack(m_md, dmemh, packed.data());
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &rkey));

    drain_and_arm(m_sender, m_worker, UCT_EVENT_SEND_COMP);
    uct_iov_t iov = { src.data(), 8192, smemh, 0, 1 };
    uct_completion_t comp = { [](uct_completion_t*) {}, 1, UCS_OK };
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov, 1,
                                               (uintptr_t)dst.data(), rkey.rkey,
                                               &comp));
    EXPECT_TRUE(readable(m_tx_fd, 20000)) << "no wakeup for a send completion";
    wait_bound bound("the put's completion");
    while ((comp.count > 0) && bound()) {
        uct_worker_progress(m_worker);
    }
    EXPECT_EQ(src, dst);
    uct_rkey_release(m_component, &rkey);
    uct_md_mem_dereg(m_md, smemh);
    uct_md_mem_dereg(m_md, dmemh);
}
